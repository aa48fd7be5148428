// Package transform re-keys cells: it holds the key layout language, the
// presets built from it (wide -> bucketed wide, tall -> wide, salt, re-key),
// entity extraction for verification, and the Go interface for transforms
// that YAML cannot express. It does no I/O; the job-file loader lives in
// package job.
//
// # Layouts
//
// A layout is a list of components. Each component has a type that fixes its
// byte form and therefore its sort order. Parsing a key walks the components
// left to right and stores each one's value in a named field; building a key
// walks them again and encodes the fields. The same layout does both, so a
// new key can be parsed back (entity extraction from the target table).
//
//	type          bytes                          field kind  sorts like the value
//	uint          width 1,2,4,8; big-endian      number      yes
//	int           width 1,2,4,8; two's complement number      no: negatives sort last
//	              (Java Bytes.toBytes)
//	sortable_int  width 1,2,4,8; sign bit flipped number      yes
//	reversed_ts   8; Long.MAX_VALUE - ts          number      newest first
//	fixed         width N; padded with pad        bytes       yes (pad 0x00)
//	string        bytes, then sep; or the rest    bytes       see below
//	              of the key when last and no sep
//	decimal       width N: zero-padded digits     number      yes with width
//	              no width: digits, then sep                  no: "10" < "9"
//	literal       the given bytes                 (none)
//	salt          width 1 or 2: bucket number     number      (spreads writes)
//	time_bucket   8-byte start millis, or ISO     number      yes
//	              text (day, hour, seconds)
//	offset        width 4 or 8: millis since the  number      yes within a bucket
//	              start of a time_bucket
//
// Strings with a separator either refuse values that contain it (the
// default) or escape it: with escape, a separator byte inside the value is
// written sep,0xFF and the end is written sep,0x00, which keeps byte order
// equal to string order. Without escape, the order of two strings where one
// is a prefix of the other is kept only when sep is 0x00 (plan warns
// otherwise). A fixed string refuses values longer than its width and
// values that end with the pad byte (they could not be told apart when read
// back).
//
// The salt of a key is FNV-1a (32 bit) over the salted fields, each encoded
// as its bytes (bytes fields) or 8 big-endian bytes (number fields, a
// negative one in two's complement), with a
// 0x00 byte between fields; the bucket is that hash modulo the bucket count.
// This never changes between releases: a salted table written today must be
// readable by a later rekey.
//
// Time buckets floor a millisecond timestamp (0 or more: before 1970 is
// refused) to a multiple of the hour, the day or N seconds counted from
// 1970-01-01T00:00:00Z. ISO text is that start in UTC with a four-digit
// year, so starts from year 10000 on are refused. An offset component
// stores the millis of the timestamp past the start of its bucket, so the
// timestamp can be rebuilt from the new key; its bucket comes earlier in
// the key (a bucket in the row serves an offset in the qualifier).
//
// A decimal without width or sep runs to the end of the key (last
// component only). Without width, a decimal is written in its shortest
// digits and a key with a leading zero ("007") is refused, so one number
// has one key; with width, values must be below 10^width. Decimals hold
// values from 0 to 2^64-1.
//
// Besides the fields a layout parses, four built-in fields come from the
// cell itself: $row, $family, $qualifier (bytes) and $ts (number).
//
// # Reading new keys back
//
// When the new key keeps every old field (Program.Invertible; a field kept
// only as a salt or a time bucket is not kept), Rekey.Unmap reads a new
// cell back to the old cell it was made from: the new key parsed under the
// target layout, the old key built under the source layout, the family
// renamed back. It never runs the forward mapping, nor the forward codec:
// keys are read and written by a second codec of its own, written again
// from the byte forms above (inversecodec.go spells out each rule), which
// shares with the first only the compiled layout description. So a bug
// that a component's forward parser and builder share shows as new cells
// that do not give back their old cells. Unmap also checks what the new
// key derives: salts (recomputed with hash/fnv), time buckets against
// their timestamp, a field held twice. Verification compares its result
// with the old cells as they are.
//
// # Transforms
//
// A Mapper maps one source cell to zero or more target cells. Compile turns a
// Spec (two layouts, a family mapping and the entity fields) into a Program,
// which is immutable and shared; each worker calls Program.New for a Rekey,
// which reuses its buffers, so mapping a cell allocates nothing. Cells given
// to emit are valid until the next call to Map.
package transform
