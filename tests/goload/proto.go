package main

// Hand-written protobuf encoding/decoding of the lanes.v1 messages, field numbers from subjects.md "Wire schema".

import (
	"errors"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

type workItem struct {
	id        []byte
	model     string
	signature uint64
	tokens    uint32
	payload   []byte
}

func appendWorkItem(b []byte, it *workItem) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, it.id)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, it.model)
	b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, it.signature)
	b = protowire.AppendTag(b, 5, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(it.tokens))
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendBytes(b, it.payload)
	return b
}

func encodeSubmit(items []workItem) []byte {
	b := make([]byte, 0, len(items)*(len(items[0].payload)+64))
	var tmp []byte
	for i := range items {
		tmp = appendWorkItem(tmp[:0], &items[i])
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, tmp)
	}
	return b
}

type itemResult struct {
	id     []byte
	status uint64
	reason string
	err    string
}

type submitReply struct {
	results []itemResult
	err     string
}

var errBad = errors.New("bad protobuf")

// walk calls f for every field; f returns the number of bytes consumed for the value or <0.
func walk(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte) int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBad
		}
		b = b[n:]
		m := f(num, typ, b)
		if m < 0 {
			return errBad
		}
		b = b[m:]
	}
	return nil
}

func skip(num protowire.Number, typ protowire.Type, b []byte) int {
	return protowire.ConsumeFieldValue(num, typ, b)
}

func decodeSubmitReply(b []byte) (submitReply, error) {
	var r submitReply
	err := walk(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return n
			}
			var ir itemResult
			if e := walk(v, func(num protowire.Number, typ protowire.Type, b []byte) int {
				switch {
				case num == 1 && typ == protowire.BytesType:
					x, n := protowire.ConsumeBytes(b)
					ir.id = x
					return n
				case num == 2 && typ == protowire.VarintType:
					x, n := protowire.ConsumeVarint(b)
					ir.status = x
					return n
				case num == 3 && typ == protowire.BytesType:
					x, n := protowire.ConsumeString(b)
					ir.reason = x
					return n
				case num == 4 && typ == protowire.BytesType:
					x, n := protowire.ConsumeString(b)
					ir.err = x
					return n
				}
				return skip(num, typ, b)
			}); e != nil {
				return -1
			}
			r.results = append(r.results, ir)
			return n
		case num == 2 && typ == protowire.BytesType:
			x, n := protowire.ConsumeString(b)
			r.err = x
			return n
		}
		return skip(num, typ, b)
	})
	return r, err
}

func encodeRegister(model string, maxBatch, maxTokens uint32, name string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, model)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(maxBatch))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(maxTokens))
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendString(b, name)
	return b
}

type registered struct {
	consumerID, pull, ack, hb, bye      string
	heartbeatMs, deadAfterMs, ackWaitMs uint64
	err                                 string
	protocolVersion                     uint64
}

func decodeRegistered(b []byte) (registered, error) {
	var r registered
	err := walk(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		if typ == protowire.BytesType {
			x, n := protowire.ConsumeString(b)
			switch num {
			case 1:
				r.consumerID = x
			case 2:
				r.pull = x
			case 3:
				r.ack = x
			case 4:
				r.hb = x
			case 5:
				r.bye = x
			case 9:
				r.err = x
			}
			return n
		}
		if typ == protowire.VarintType {
			x, n := protowire.ConsumeVarint(b)
			switch num {
			case 6:
				r.heartbeatMs = x
			case 7:
				r.deadAfterMs = x
			case 8:
				r.ackWaitMs = x
			case 10:
				r.protocolVersion = x
			}
			return n
		}
		return skip(num, typ, b)
	})
	return r, err
}

func encodePull(maxBatches, expiresMs uint32) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(maxBatches))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(expiresMs))
	return b
}

type batchItem struct {
	id         []byte
	tokens     uint64
	payloadLen int
	deliveries uint64
}

type batch struct {
	batchID   uint64
	model     string
	signature uint64
	padTo     uint64
	items     []batchItem
	status    uint64
	err       string
}

func decodeBatch(b []byte, out *batch) error {
	*out = batch{items: out.items[:0]}
	return walk(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			out.batchID = x
			return n
		case num == 2 && typ == protowire.BytesType:
			x, n := protowire.ConsumeString(b)
			out.model = x
			return n
		case num == 3 && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			out.signature = x
			return n
		case num == 5 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			out.padTo = x
			return n
		case num == 6 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return n
			}
			var bi batchItem
			if e := walk(v, func(num protowire.Number, typ protowire.Type, b []byte) int {
				switch {
				case num == 1 && typ == protowire.BytesType:
					x, n := protowire.ConsumeBytes(b)
					bi.id = x
					return n
				case num == 2 && typ == protowire.VarintType:
					x, n := protowire.ConsumeVarint(b)
					bi.tokens = x
					return n
				case num == 3 && typ == protowire.BytesType:
					x, n := protowire.ConsumeBytes(b)
					bi.payloadLen = len(x)
					return n
				case num == 5 && typ == protowire.VarintType:
					x, n := protowire.ConsumeVarint(b)
					bi.deliveries = x
					return n
				}
				return skip(num, typ, b)
			}); e != nil {
				return -1
			}
			out.items = append(out.items, bi)
			return n
		case num == 7 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			out.status = x
			return n
		case num == 8 && typ == protowire.BytesType:
			x, n := protowire.ConsumeString(b)
			out.err = x
			return n
		}
		return skip(num, typ, b)
	})
}

func encodeAckAll(batchID uint64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, batchID)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return b
}

type ackReply struct {
	acked, returned, unknown uint64
	err                      string
}

func decodeAckReply(b []byte) (ackReply, error) {
	var r ackReply
	err := walk(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		if typ == protowire.VarintType {
			x, n := protowire.ConsumeVarint(b)
			switch num {
			case 1:
				r.acked = x
			case 2:
				r.returned = x
			case 3:
				r.unknown = x
			}
			return n
		}
		if num == 4 && typ == protowire.BytesType {
			x, n := protowire.ConsumeString(b)
			r.err = x
			return n
		}
		return skip(num, typ, b)
	})
	return r, err
}

// codeWord: the reason code word that opens an error text ("unknown_consumer: ...").
func codeWord(s string) string {
	w, _, _ := strings.Cut(s, ":")
	return w
}
