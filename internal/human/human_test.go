package human

import "testing"

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{999.4, "999"},
		{1000, "1.0k"},
		{12345, "12.3k"},
		{999_949, "999.9k"},
		{1e6, "1.00M"},
		{1_234_567, "1.23M"},
	} {
		if got := Rate(tc.v); got != tc.want {
			t.Errorf("Rate(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1 << 10, "1.0 KiB"},
		{3277, "3.2 KiB"},
		{20 << 20, "20.0 MiB"},
		{1<<30 - 1, "1024.0 MiB"},
		{3 << 29, "1.5 GiB"},
	} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestCountAndByteRate(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{{Count(999), "999"}, {Count(12345), "12.3k"}, {Count(1234567), "1.23M"}, {ByteRate(5671488), "5.4 MiB/s"}, {ByteRate(100), "100 B/s"}} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
