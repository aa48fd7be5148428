package transform

// Date text for ISO time buckets, written and read without package time so
// that mapping a cell allocates nothing. All dates are UTC, years 0000-9999
// (so the text has a fixed width and sorts like the time).

const (
	msPerDay = 86_400_000
	// isoMax is 10000-01-01T00:00:00Z in ms: the first instant that needs a
	// five-digit year.
	isoMax = 253_402_300_800_000
)

// isoWidth is the text width of a bucket of the given unit.
func isoWidth(unit string) int {
	switch unit {
	case "day":
		return 10 // 2006-01-02
	case "hour":
		return 13 // 2006-01-02T15
	}
	return 19 // 2006-01-02T15:04:05
}

func isoForm(unit string) string {
	return "2006-01-02T15:04:05"[:isoWidth(unit)]
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date (Howard
// Hinnant's days_from_civil inverse; public-domain algorithm).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysFrom is the inverse of civil.
func daysFrom(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := m - 3
	if m <= 2 {
		mp = m + 9
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func append2(dst []byte, v int64) []byte { return append(dst, byte('0'+v/10), byte('0'+v%10)) }

// appendISO writes the first width bytes of "YYYY-MM-DDTHH:MM:SS" for ms,
// which must be in [0, isoMax).
func appendISO(dst []byte, ms int64, width int) []byte {
	days, rem := ms/msPerDay, ms%msPerDay/1000
	y, mo, d := civil(days)
	dst = append(dst, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	dst = append2(dst, mo)
	dst = append(dst, '-')
	dst = append2(dst, d)
	if width <= 10 {
		return dst
	}
	dst = append(dst, 'T')
	dst = append2(dst, rem/3600)
	if width <= 13 {
		return dst
	}
	dst = append(dst, ':')
	dst = append2(dst, rem/60%60)
	dst = append(dst, ':')
	return append2(dst, rem%60)
}

// parseISO reads text written by appendISO (10, 13 or 19 bytes) back to ms.
func parseISO(b []byte) (int64, bool) {
	num := func(i, n int) (int64, bool) {
		var v int64
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
	if len(b) != 10 && len(b) != 13 && len(b) != 19 {
		return 0, false
	}
	if b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	y, ok1 := num(0, 4)
	mo, ok2 := num(5, 2)
	d, ok3 := num(8, 2)
	if !ok1 || !ok2 || !ok3 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
		return 0, false
	}
	ms := daysFrom(y, mo, d) * msPerDay
	if ms < 0 {
		return 0, false
	}
	if len(b) == 10 {
		return ms, true
	}
	h, ok := num(11, 2)
	if b[10] != 'T' || !ok || h > 23 {
		return 0, false
	}
	ms += h * 3_600_000
	if len(b) == 13 {
		return ms, true
	}
	mi, ok1 := num(14, 2)
	s, ok2 := num(17, 2)
	if b[13] != ':' || b[16] != ':' || !ok1 || !ok2 || mi > 59 || s > 59 {
		return 0, false
	}
	return ms + mi*60_000 + s*1000, true
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// printable renders bytes the way HBase's Bytes.toStringBinary does: printable
// ASCII as is, everything else (and backslash) as \xHH. For messages only.
func printable(b []byte) string {
	return string(AppendPrintable(nil, b))
}

// AppendPrintable appends b to dst with printable ASCII kept and every other
// byte written as \xHH (the form of HBase's Bytes.toStringBinary).
func AppendPrintable(dst, b []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range b {
		if c >= ' ' && c <= '~' && c != '\\' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
	}
	return dst
}
