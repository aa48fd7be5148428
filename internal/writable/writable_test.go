package writable

import (
	"math"
	"testing"
)

func TestReadVLong(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want int64
	}{
		{"zero", []byte{0x00}, 0},
		{"largest one-byte", []byte{0x7f}, 127},
		{"smallest one-byte", []byte{0x90}, -112},
		{"128 takes a marker", []byte{0x8f, 0x80}, 128},
		{"256 takes two bytes", []byte{0x8e, 0x01, 0x00}, 256},
		{"-113 stored as ones' complement", []byte{0x87, 0x70}, -113},
		{"max int64", []byte{0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxInt64},
		{"min int64", []byte{0x80, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MinInt64},
		{"trailing bytes are not read", []byte{0x8f, 0x80, 0xaa}, 128},
	}
	for _, tc := range cases {
		got, n, err := ReadVLong(tc.in)
		wantN := len(tc.in)
		if tc.name == "trailing bytes are not read" {
			wantN = 2
		}
		if err != nil || got != tc.want || n != wantN {
			t.Errorf("%s: ReadVLong(%x) = %d, %d, %v; want %d, %d", tc.name, tc.in, got, n, err, tc.want, wantN)
		}
	}
}

func TestReadVLongTruncated(t *testing.T) {
	for _, in := range [][]byte{nil, {0x8f}, {0x88, 0x7f, 0xff}, {0x80}} {
		if v, n, err := ReadVLong(in); err == nil {
			t.Errorf("ReadVLong(%x) = %d, %d; want an error", in, v, n)
		}
	}
}

func FuzzReadVLong(f *testing.F) {
	f.Add([]byte{0x8e, 0x01, 0x00})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, n, err := ReadVLong(b)
		if err == nil && (n < 1 || n > 9 || n > len(b)) {
			t.Fatalf("ReadVLong(%x) claims %d bytes", b, n)
		}
	})
}
