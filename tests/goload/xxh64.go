package main

import (
	"encoding/binary"
	"math/bits"
)

// Hand-written XXH64 (seed 0 by default), checked against subjects.md's test vectors.
const (
	p1 uint64 = 11400714785074694791
	p2 uint64 = 14029467366897019727
	p3 uint64 = 1609587929392839161
	p4 uint64 = 9650029242287828579
	p5 uint64 = 2870177450012600261
)

func xround(acc, in uint64) uint64 {
	acc += in * p2
	acc = bits.RotateLeft64(acc, 31)
	return acc * p1
}

func xmerge(acc, v uint64) uint64 {
	acc ^= xround(0, v)
	return acc*p1 + p4
}

func xxh64(b []byte, seed uint64) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		v1 := seed + p1 + p2
		v2 := seed + p2
		v3 := seed
		v4 := seed - p1
		for len(b) >= 32 {
			v1 = xround(v1, binary.LittleEndian.Uint64(b[0:]))
			v2 = xround(v2, binary.LittleEndian.Uint64(b[8:]))
			v3 = xround(v3, binary.LittleEndian.Uint64(b[16:]))
			v4 = xround(v4, binary.LittleEndian.Uint64(b[24:]))
			b = b[32:]
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xmerge(h, v1)
		h = xmerge(h, v2)
		h = xmerge(h, v3)
		h = xmerge(h, v4)
	} else {
		h = seed + p5
	}
	h += uint64(n)
	for len(b) >= 8 {
		k := xround(0, binary.LittleEndian.Uint64(b))
		h ^= k
		h = bits.RotateLeft64(h, 27)*p1 + p4
		b = b[8:]
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b)) * p1
		h = bits.RotateLeft64(h, 23)*p2 + p3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * p5
		h = bits.RotateLeft64(h, 11) * p1
	}
	h ^= h >> 33
	h *= p2
	h ^= h >> 29
	h *= p3
	h ^= h >> 32
	return h
}

// shapeSignature per subjects.md "Shape signatures": XXH64 of the component hashes, 8 LE bytes each.
func shapeSignature(components []string) (uint64, []uint64) {
	hs := make([]uint64, len(components))
	buf := make([]byte, 0, 8*len(components))
	for i, c := range components {
		hs[i] = xxh64([]byte(c), 0)
		buf = binary.LittleEndian.AppendUint64(buf, hs[i])
	}
	return xxh64(buf, 0), hs
}
