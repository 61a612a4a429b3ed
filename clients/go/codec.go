// codec.go - every lanesched message to and from bytes (codec/lanes.proto, proto3), written with
// protowire from Debian's golang-google-protobuf-dev, field by field.
//
// Invariants:
//  1. Field numbers and wire types are those of codec/lanes.proto; codec_test.go checks every
//     message against bytes the C codec produced and the schema file's field list.
//  2. Encoders leave out zero values (proto3: unset = absent) and write repeated scalars packed;
//     decoders take packed and unpacked alike and skip fields they do not know, so a newer
//     daemon's additions are ignored.
//
// Rejected: protoc-gen-go generated code (protoc and the plugin at build time, and generated
// files that drift from the schema); the protobuf reflection runtime (much larger than the twelve
// messages need).
package lanes

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

var errMalformed = errors.New("malformed protobuf")

type enc struct{ b []byte }

func (e *enc) bytes(num protowire.Number, v []byte) {
	if len(v) > 0 {
		e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
		e.b = protowire.AppendBytes(e.b, v)
	}
}
func (e *enc) str(num protowire.Number, v string) {
	if v != "" {
		e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
		e.b = protowire.AppendString(e.b, v)
	}
}
func (e *enc) varint(num protowire.Number, v uint64) {
	if v != 0 {
		e.b = protowire.AppendTag(e.b, num, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, v)
	}
}
func (e *enc) boolean(num protowire.Number, v bool) {
	if v {
		e.varint(num, 1)
	}
}
func (e *enc) fixed64(num protowire.Number, v uint64) {
	if v != 0 {
		e.b = protowire.AppendTag(e.b, num, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, v)
	}
}
func (e *enc) packedFixed64(num protowire.Number, vs []uint64) {
	if len(vs) > 0 {
		e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
		e.b = protowire.AppendVarint(e.b, uint64(8*len(vs)))
		for _, v := range vs {
			e.b = protowire.AppendFixed64(e.b, v)
		}
	}
}
func (e *enc) packedVarint(num protowire.Number, vs []uint64) {
	if len(vs) > 0 {
		var inner []byte
		for _, v := range vs {
			inner = protowire.AppendVarint(inner, v)
		}
		e.bytes(num, inner)
	}
}

// fields walks a message, calling fn with each field's number, type and value bytes (for
// varint and fixed types, the decoded number in v).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		var v uint64
		var data []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if err := fn(num, typ, v, data); err != nil {
			return err
		}
	}
	return nil
}

// wireItem is a WorkItem as sent.
type wireItem struct {
	id              []byte
	model           string
	componentHashes []uint64
	signature       uint64
	tokens          uint32
	payload         []byte
	replyTo         string
	createdUnixNs   uint64
	prefixTokens    uint32
	maxWaitMs       uint32
}

func (w *wireItem) encode() []byte {
	var e enc
	e.bytes(1, w.id)
	e.str(2, w.model)
	e.packedFixed64(3, w.componentHashes)
	e.fixed64(4, w.signature)
	e.varint(5, uint64(w.tokens))
	e.bytes(6, w.payload)
	e.str(7, w.replyTo)
	e.varint(8, w.createdUnixNs)
	e.varint(9, uint64(w.prefixTokens))
	e.varint(10, uint64(w.maxWaitMs))
	return e.b
}

// submitEncode joins encoded WorkItems as a Submit (field 1 each).
func submitEncode(items [][]byte) []byte {
	var e enc
	for _, it := range items {
		e.b = protowire.AppendTag(e.b, 1, protowire.BytesType)
		e.b = protowire.AppendBytes(e.b, it)
	}
	return e.b
}

type wireItemResult struct {
	id     []byte
	status uint64
	reason string
	error  string
}

type wireSubmitReply struct {
	results []wireItemResult
	error   string
}

func submitReplyDecode(b []byte) (*wireSubmitReply, error) {
	r := &wireSubmitReply{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			var ir wireItemResult
			err := fields(data, func(n protowire.Number, t protowire.Type, v uint64, d []byte) error {
				switch {
				case n == 1 && t == protowire.BytesType:
					ir.id = append([]byte(nil), d...)
				case n == 2 && t == protowire.VarintType:
					ir.status = v
				case n == 3 && t == protowire.BytesType:
					ir.reason = string(d)
				case n == 4 && t == protowire.BytesType:
					ir.error = string(d)
				}
				return nil
			})
			if err != nil {
				return err
			}
			r.results = append(r.results, ir)
		case num == 2 && typ == protowire.BytesType:
			r.error = string(data)
		}
		return nil
	})
	return r, err
}

type wireRegister struct {
	model                                        string
	maxBatchSize, maxBatchTokens, maxInputTokens uint32
	name                                         string
	batchFixedUs, tokenNs, cacheShapes           uint32
}

func (r *wireRegister) encode() []byte {
	var e enc
	e.str(1, r.model)
	e.varint(2, uint64(r.maxBatchSize))
	e.varint(3, uint64(r.maxBatchTokens))
	e.varint(4, uint64(r.maxInputTokens))
	e.str(5, r.name)
	e.varint(6, uint64(r.batchFixedUs))
	e.varint(7, uint64(r.tokenNs))
	e.varint(8, uint64(r.cacheShapes))
	return e.b
}

// Registered is the daemon's answer to Register: the consumer's id, the four subjects it uses
// (never built from the id: the daemon may make them carry more than the id) and its timing.
type Registered struct {
	ConsumerID       string
	PullSubject      string
	AckSubject       string
	HeartbeatSubject string
	ByeSubject       string
	HeartbeatMs      uint32
	DeadAfterMs      uint32
	AckWaitMs        uint32
	Error            string
	ProtocolVersion  uint32
}

func registeredDecode(b []byte) (*Registered, error) {
	r := &Registered{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case 1:
				r.ConsumerID = string(data)
			case 2:
				r.PullSubject = string(data)
			case 3:
				r.AckSubject = string(data)
			case 4:
				r.HeartbeatSubject = string(data)
			case 5:
				r.ByeSubject = string(data)
			case 9:
				r.Error = string(data)
			}
		} else if typ == protowire.VarintType {
			switch num {
			case 6:
				r.HeartbeatMs = uint32(v)
			case 7:
				r.DeadAfterMs = uint32(v)
			case 8:
				r.AckWaitMs = uint32(v)
			case 10:
				r.ProtocolVersion = uint32(v)
			}
		}
		return nil
	})
	return r, err
}

func pullEncode(maxBatches, expiresMs uint32) []byte {
	var e enc
	e.varint(1, uint64(maxBatches))
	e.varint(2, uint64(expiresMs))
	return e.b
}

// BatchItem is one item of a batch: the producer's id and payload, its tokens, where its result
// goes, how often it was delivered (more than 1: seen before) and the tokens of its shape's
// cacheable prefix as the producer declared them (0: unknown).
type BatchItem struct {
	ID           []byte
	Tokens       uint32
	Payload      []byte
	ReplyTo      string
	Deliveries   uint32
	PrefixTokens uint32
}

type wireBatch struct {
	batchID   uint64
	model     string
	signature uint64
	lane      uint32
	padTo     uint32
	items     []BatchItem
	status    uint64
	error     string
}

// Batch statuses (lanes.proto BatchStatus).
const (
	batchOK      = 0
	batchExpired = 1
	batchError   = 2
)

func batchDecode(b []byte) (*wireBatch, error) {
	r := &wireBatch{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.batchID = v
		case num == 2 && typ == protowire.BytesType:
			r.model = string(data)
		case num == 3 && typ == protowire.Fixed64Type:
			r.signature = v
		case num == 4 && typ == protowire.VarintType:
			r.lane = uint32(v)
		case num == 5 && typ == protowire.VarintType:
			r.padTo = uint32(v)
		case num == 6 && typ == protowire.BytesType:
			var it BatchItem
			err := fields(data, func(n protowire.Number, t protowire.Type, v uint64, d []byte) error {
				switch {
				case n == 1 && t == protowire.BytesType:
					it.ID = append([]byte(nil), d...)
				case n == 2 && t == protowire.VarintType:
					it.Tokens = uint32(v)
				case n == 3 && t == protowire.BytesType:
					it.Payload = append([]byte(nil), d...)
				case n == 4 && t == protowire.BytesType:
					it.ReplyTo = string(d)
				case n == 5 && t == protowire.VarintType:
					it.Deliveries = uint32(v)
				case n == 6 && t == protowire.VarintType:
					it.PrefixTokens = uint32(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			r.items = append(r.items, it)
		case num == 7 && typ == protowire.VarintType:
			r.status = v
		case num == 8 && typ == protowire.BytesType:
			r.error = string(data)
		}
		return nil
	})
	return r, err
}

type wireAck struct {
	batchID    uint64
	all        bool
	ack, nak   []uint32
	inProgress bool
}

func u64s(vs []uint32) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(v)
	}
	return out
}

func (a *wireAck) encode() []byte {
	var e enc
	e.varint(1, a.batchID)
	e.boolean(2, a.all)
	e.packedVarint(3, u64s(a.ack))
	e.packedVarint(4, u64s(a.nak))
	e.boolean(5, a.inProgress)
	return e.b
}

// AckReply is the daemon's answer to an Ack. Code is "" when it carried no error, else its word:
// unknown_batch (already settled or returned: do not retry), unknown_position (nothing changed),
// unknown_consumer (the consumer registers again).
type AckReply struct {
	Acked, Returned, Unknown uint32
	Error                    string
	Code                     string
}

func ackReplyDecode(b []byte) (*AckReply, error) {
	r := &AckReply{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.Acked = uint32(v)
		case num == 2 && typ == protowire.VarintType:
			r.Returned = uint32(v)
		case num == 3 && typ == protowire.VarintType:
			r.Unknown = uint32(v)
		case num == 4 && typ == protowire.BytesType:
			r.Error = string(data)
		}
		return nil
	})
	r.Code = CodeWord(r.Error)
	return r, err
}

func heartbeatEncode(ids []uint64) []byte {
	var e enc
	e.packedVarint(1, ids)
	return e.b
}
