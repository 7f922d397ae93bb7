package pgbulk

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Exec runs sql with b's parameters on conn, having encoded them here, in
// PostgreSQL's binary format, into buf (grown as needed, and returned for
// the next statement). pgx encodes each element of an array through its
// reflection, boxing it, into a buffer grown from a few hundred bytes at
// every statement: for a flush of thousands of schedules, most of what the
// flush allocated. The statement is parsed at each call, unprepared (as it
// would be through a connection pooler): Exec is for the statements whose
// rows cost far more than their parsing.
//
// A parameter is a string, []byte, int32, int64, bool or time.Time
// (timestamptz), or a slice of one of them (an array); its SQL casts it
// where the column's type differs (a date sent as text).
func (b *Batch) Exec(ctx context.Context, conn *pgconn.PgConn, sql string, buf []byte) (pgconn.CommandTag, []byte, error) {
	values, oids, buf, err := b.encode(buf[:0])
	if err != nil {
		return pgconn.CommandTag{}, buf, err
	}
	formats := make([]int16, len(values))
	for i := range formats {
		formats[i] = 1 // binary
	}
	tag, err := conn.ExecParams(ctx, sql, values, oids, formats, nil).Close()
	return tag, buf, err
}

// The OIDs of the types Exec sends, and of their arrays.
const (
	oidBool, oidBools               = 16, 1000
	oidBytea, oidByteas             = 17, 1001
	oidInt8, oidInt8s               = 20, 1016
	oidInt4, oidInt4s               = 23, 1007
	oidText, oidTexts               = 25, 1009
	oidTimestamptz, oidTimestamptzs = 1184, 1185
)

// encode appends each parameter's binary form to buf and returns the
// parameters (slices of buf), their OIDs and buf.
func (b *Batch) encode(buf []byte) ([][]byte, []uint32, []byte, error) {
	size := 0
	for _, a := range b.Args {
		size += encodedSize(a)
	}
	if cap(buf) < size || buf == nil { // nil would send an empty value as NULL
		buf = make([]byte, 0, max(size, 64))
	}
	ends := make([]int, len(b.Args))
	oids := make([]uint32, len(b.Args))
	for i, a := range b.Args {
		var ok bool
		buf, oids[i], ok = appendParam(buf, a)
		if !ok {
			return nil, nil, buf, fmt.Errorf("pgbulk: parameter $%d: a %T is not sent in binary here", i+1, a)
		}
		ends[i] = len(buf)
	}
	values := make([][]byte, len(b.Args))
	from := 0
	for i, end := range ends {
		values[i] = buf[from:end:end]
		from = end
	}
	return values, oids, buf, nil
}

// encodedSize is the length of a's binary form (0 for a type appendParam
// refuses).
func encodedSize(a any) int {
	const header = 20 // an array's dimensions, flags and element type
	switch v := a.(type) {
	case string:
		return len(v)
	case []byte:
		return len(v)
	case int32:
		return 4
	case int64, time.Time:
		return 8
	case bool:
		return 1
	case []string:
		n := header + 4*len(v)
		for _, s := range v {
			n += len(s)
		}
		return n
	case [][]byte:
		n := header + 4*len(v)
		for _, s := range v {
			n += len(s)
		}
		return n
	case []int32:
		return header + 8*len(v)
	case []int64:
		return header + 12*len(v)
	case []time.Time:
		return header + 12*len(v)
	case []bool:
		return header + 5*len(v)
	}
	return 0
}

// appendParam appends a's binary form to buf, and returns its OID; ok is
// false for a type it does not send.
func appendParam(buf []byte, a any) (out []byte, oid uint32, ok bool) {
	switch v := a.(type) {
	case string:
		return append(buf, v...), oidText, true
	case []byte:
		return append(buf, v...), oidBytea, true
	case int32:
		return binary.BigEndian.AppendUint32(buf, uint32(v)), oidInt4, true
	case int64:
		return binary.BigEndian.AppendUint64(buf, uint64(v)), oidInt8, true
	case time.Time:
		return binary.BigEndian.AppendUint64(buf, uint64(microsSince2000(v))), oidTimestamptz, true
	case bool:
		return append(buf, boolByte(v)), oidBool, true
	case []string:
		return appendArray(buf, oidText, v, func(b []byte, s string) []byte { return append(b, s...) }), oidTexts, true
	case [][]byte:
		return appendArray(buf, oidBytea, v, func(b []byte, s []byte) []byte { return append(b, s...) }), oidByteas, true
	case []int32:
		return appendArray(buf, oidInt4, v, func(b []byte, n int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(n)) }), oidInt4s, true
	case []int64:
		return appendArray(buf, oidInt8, v, func(b []byte, n int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(n)) }), oidInt8s, true
	case []time.Time:
		return appendArray(buf, oidTimestamptz, v, func(b []byte, t time.Time) []byte {
			return binary.BigEndian.AppendUint64(b, uint64(microsSince2000(t)))
		}), oidTimestamptzs, true
	case []bool:
		return appendArray(buf, oidBool, v, func(b []byte, x bool) []byte { return append(b, boolByte(x)) }), oidBools, true
	}
	return buf, 0, false
}

// appendArray appends a one-dimensional array of vs, none NULL: its
// dimensions (none when empty), then each element's length and form.
func appendArray[T any](buf []byte, elem uint32, vs []T, put func([]byte, T) []byte) []byte {
	be := binary.BigEndian
	if len(vs) == 0 {
		buf = be.AppendUint32(buf, 0) // no dimension
		buf = be.AppendUint32(buf, 0) // no NULL
		return be.AppendUint32(buf, elem)
	}
	buf = be.AppendUint32(buf, 1)
	buf = be.AppendUint32(buf, 0)
	buf = be.AppendUint32(buf, elem)
	buf = be.AppendUint32(buf, uint32(len(vs)))
	buf = be.AppendUint32(buf, 1) // the lower bound
	for _, v := range vs {
		at := len(buf)
		buf = put(be.AppendUint32(buf, 0), v)
		be.PutUint32(buf[at:], uint32(len(buf)-at-4))
	}
	return buf
}

// microsSince2000 is t as PostgreSQL's timestamptz holds it: microseconds
// since 2000-01-01 UTC, the nanoseconds truncated (as pgx sends them).
func microsSince2000(t time.Time) int64 {
	const unixTo2000 = 946684800 * 1000000
	return t.Unix()*1000000 + int64(t.Nanosecond())/1000 - unixTo2000
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
