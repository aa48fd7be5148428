// Package human formats counts for people: rates with k and M suffixes and
// byte sizes in binary units. It imports nothing of the project, so every
// package that prints a summary or a progress line can share it.
package human

import "fmt"

// Rate renders a per-second rate (cells/s, rows/s) with three significant
// figures or so: 1234567 as "1.23M", 12345 as "12.3k", 999 as "999". The
// caller adds the unit.
func Rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// Bytes renders a byte count in the largest binary unit it reaches, with
// one decimal: "1.5 GiB", "20.0 MiB", "3.2 KiB", or "512 B" below 1 KiB.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Count renders a count as Rate does ("1.23M", "12.3k", "999"): a number
// of cells in a progress line, where every digit would move each tick.
func Count(n int64) string { return Rate(float64(n)) }

// ByteRate renders bytes per second in binary units, as Bytes renders a
// size: "54.2 MiB/s".
func ByteRate(v float64) string { return Bytes(int64(v)) + "/s" }
