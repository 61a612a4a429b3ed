// shape.go - shape signatures (subjects.md, "Shape signatures and test vectors").
//
// Invariants:
//  1. h_i = XXH64(component bytes, seed 0); a string component is its UTF-8 bytes.
//  2. signature = XXH64(h_0 || ... || h_{n-1}, seed 0), each h_i as 8 little-endian bytes; no
//     components hashes zero bytes (0xef46db3751d8e999).
package lanes

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// EmptySignature is the signature of no components.
const EmptySignature uint64 = 0xef46db3751d8e999

// ShapeHash is XXH64 (seed 0) of one component.
func ShapeHash(component string) uint64 { return xxhash.Sum64String(component) }

// ShapeSignHashes is the signature of component hashes given in order.
func ShapeSignHashes(hashes []uint64) uint64 {
	buf := make([]byte, 8*len(hashes))
	for i, h := range hashes {
		binary.LittleEndian.PutUint64(buf[8*i:], h)
	}
	return xxhash.Sum64(buf)
}

// ShapeSign is the signature of a prompt's cacheable components, in order.
func ShapeSign(components ...string) uint64 {
	hs := make([]uint64, len(components))
	for i, c := range components {
		hs[i] = ShapeHash(c)
	}
	return ShapeSignHashes(hs)
}

// ShapeFormat writes a signature as P.stats does: "0x" and 16 lowercase hex digits.
func ShapeFormat(sig uint64) string { return fmt.Sprintf("0x%016x", sig) }

// ShapeParse reads "0x..." or bare hex (1 to 16 digits, not 0).
func ShapeParse(s string) (uint64, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	v, err := strconv.ParseUint(t, 16, 64)
	if err != nil || len(t) == 0 || len(t) > 16 || v == 0 {
		return 0, fmt.Errorf("not a 64-bit hex signature: %q", s)
	}
	return v, nil
}
