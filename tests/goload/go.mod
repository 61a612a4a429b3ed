module lanesched/tests/goload

go 1.19

require (
	github.com/cespare/xxhash/v2 v2.1.1
	github.com/nats-io/nats.go v1.22.1
	google.golang.org/protobuf v1.28.1
)

require (
	github.com/nats-io/nkeys v0.3.0 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.0.0-20220722155217-630584e8d5aa // indirect
	golang.org/x/sys v0.0.0-20220722155257-8c9f86f7a55f // indirect
)
