package transform

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The hot path replaces a few obvious loops with faster ones; these tests
// hold each to the obvious version.

// TestParseDigitsAgreesWithStrconv: the eight-at-a-time digit reader takes
// exactly what strconv.ParseUint takes from plain digits, at every length
// and with a stray byte anywhere.
func TestParseDigitsAgreesWithStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte) {
		t.Helper()
		got, ok := parseDigits(b)
		want, err := strconv.ParseUint(string(b), 10, 64)
		wantOK := err == nil && len(b) > 0 && b[0] != '+' && b[0] != '-'
		for _, x := range b {
			wantOK = wantOK && x >= '0' && x <= '9'
		}
		if ok != wantOK || ok && got != want {
			t.Fatalf("parseDigits(%q) = %d, %v; want %d, %v", b, got, ok, want, wantOK)
		}
	}
	for _, s := range []string{"", "0", "9", "00000000", "99999999", "123456789", "1767225600000",
		"9999999999999999999", "18446744073709551615", "18446744073709551616", "99999999999999999999", "000000000000000000001"} {
		check([]byte(s))
	}
	stray := []byte{'/', ':', '0' - 16, '9' + 16, 0x00, 0xFF, 'a', ' '}
	for i := 0; i < 200_000; i++ {
		b := make([]byte, rng.IntN(22))
		for j := range b {
			b[j] = '0' + byte(rng.IntN(10))
		}
		if len(b) > 0 && rng.IntN(3) == 0 {
			b[rng.IntN(len(b))] = stray[rng.IntN(len(stray))]
		}
		check(b)
	}
}

func TestIndexByteAgreesWithBytes(t *testing.T) {
	for n := 0; n <= 40; n++ {
		b := bytes.Repeat([]byte{'a'}, n)
		for i := -1; i < n; i++ {
			if i >= 0 {
				b[i] = '|'
			}
			if got, want := indexByte(b, '|'), bytes.IndexByte(b, '|'); got != want {
				t.Fatalf("indexByte(%q) = %d, want %d", b, got, want)
			}
			if i >= 0 {
				b[i] = 'a'
			}
		}
	}
}

// TestFloorCache: the remembered bucket never answers for a timestamp
// outside it, another span, or a bucket whose end overflows.
func TestFloorCache(t *testing.T) {
	var rec record
	rng := rand.New(rand.NewPCG(3, 4))
	spans := []int64{1000, 7000, 3_600_000, msPerDay}
	ts := int64(1767268800123)
	for i := 0; i < 100_000; i++ {
		span := spans[rng.IntN(len(spans))]
		switch rng.IntN(4) {
		case 0:
			ts += rng.Int64N(2 * span)
		case 1:
			ts -= rng.Int64N(2 * span)
		case 2:
			ts = rng.Int64N(1 << 62)
		case 3:
			ts = 1<<63 - 1 - rng.Int64N(2*span)
		}
		if ts < 0 {
			ts = -ts
		}
		if got, want := rec.floor(ts, span), ts-ts%span; got != want {
			t.Fatalf("floor(%d, %d) = %d, want %d", ts, span, got, want)
		}
	}
}
