package main

import "testing"

func TestVectors(t *testing.T) {
	cases := []struct {
		comps []string
		sig   uint64
	}{
		{nil, 0xef46db3751d8e999},
		{[]string{"You are a helpful assistant."}, 0x91f47f2f45b64efd},
		{[]string{"You are a helpful assistant.", "Answer in French.", "Tools: search, calculator."}, 0xa340b41b91cca53d},
		{[]string{"Tools: search, calculator.", "Answer in French.", "You are a helpful assistant."}, 0xaf6225c57a35ec89},
		{[]string{"You are a helpful assistant.", "Answer in French.", "Tools: search, calculator.",
			"Context: the user is a customer of an online bookshop and asks about orders, deliveries, returns and refunds.",
			"Be brief."}, 0x6a17c9adc0a244e4},
	}
	for _, c := range cases {
		s, hs := shapeSignature(c.comps)
		if s != c.sig {
			t.Errorf("%v: got %#x want %#x (hashes %x)", c.comps, s, c.sig, hs)
		}
	}
	_, hs := shapeSignature([]string{"You are a helpful assistant.", "Answer in French.", "Tools: search, calculator."})
	want := []uint64{0xe4a58ad40a48973b, 0x6fd2a283f58d194e, 0x425afd5d136c7e5e}
	for i := range want {
		if hs[i] != want[i] {
			t.Errorf("h%d %#x want %#x", i, hs[i], want[i])
		}
	}
	// long input (>=32 bytes) cross-check with a known value: xxh64 of 100 bytes 0..99 is checked against the vendored cespare impl only in a separate test
}

func TestLongInput(t *testing.T) {
	b := make([]byte, 1000)
	for i := range b {
		b[i] = byte(i * 7)
	}
	for _, n := range []int{0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000} {
		if got, want := xxh64(b[:n], 0), refXXH(b[:n]); got != want {
			t.Errorf("n=%d got %#x want %#x", n, got, want)
		}
	}
}
