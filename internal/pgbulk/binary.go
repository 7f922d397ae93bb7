package pgbulk

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Buffer is the room Send encodes parameters into, kept from one call to
// the next (in its caller's keeping, rather than a sync.Pool's, which
// every collection empties). Its zero value is ready; a call that finds
// it taken by another makes its own.
type Buffer struct {
	mu    sync.Mutex
	spare []byte
}

func (b *Buffer) take() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spare
	b.spare = nil
	return s[:0]
}

func (b *Buffer) give(s []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cap(s) > cap(b.spare) {
		b.spare = s[:0]
	}
}

// Statement is a statement and its parameters, for Send.
type Statement struct {
	SQL    string
	Params *Batch // nil: none
}

// Send runs stmts in one round trip on conn, their parameters encoded
// here, in PostgreSQL's binary format, into bufs' room (grown as needed,
// and kept for the next call), and returns each one's result, its rows in
// text format. pgx encodes each element of an array through its
// reflection, boxing it, into a buffer grown from a few hundred bytes at
// every statement: for a statistics flush of thousands of schedules, and
// for each aligned burst's fire record, most of what they allocated.
//
// Each statement is prepared once on conn when conn caches statements
// (pgx's default), and parsed at each call otherwise (through a
// connection pooler).
//
// A parameter is a string, []byte, int32, int64, bool, time.Time
// (timestamptz) or Date, or a slice of one of them (an array), and its
// SQL casts it to that type ($1::text[]).
func Send(ctx context.Context, conn *pgx.Conn, bufs *Buffer, stmts ...Statement) ([]*pgconn.Result, error) {
	prepare := conn.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
	var batch pgconn.Batch
	b := bufs.take() // grown by the first calls, then kept
	defer func() { bufs.give(b) }()
	for i, st := range stmts {
		var args []any
		if st.Params != nil {
			args = st.Params.Args
		}
		from := len(b)
		ends := make([]int, len(args))
		oids := make([]uint32, len(args))
		for j, a := range args {
			var ok bool
			if b, oids[j], ok = appendParam(b, a); !ok {
				return nil, fmt.Errorf("pgbulk: statement %d, parameter $%d: a %T is not sent in binary here", i+1, j+1, a)
			}
			ends[j] = len(b)
		}
		values := make([][]byte, len(args))
		formats := make([]int16, len(args))
		for j, end := range ends {
			values[j], formats[j], from = b[from:end:end], 1, end
			if values[j] == nil {
				values[j] = []byte{} // empty, not NULL
			}
		}
		if !prepare {
			batch.ExecParams(st.SQL, values, oids, formats, nil)
			continue
		}
		sd, err := conn.Prepare(ctx, st.SQL, st.SQL)
		if err != nil {
			return nil, err
		}
		for j, oid := range sd.ParamOIDs {
			if j < len(oids) && oids[j] != oid {
				return nil, fmt.Errorf("pgbulk: statement %d, parameter $%d: a %T is sent as OID %d, the statement reads OID %d", i+1, j+1, args[j], oids[j], oid)
			}
		}
		batch.ExecPrepared(sd.Name, values, formats, nil)
	}
	results, err := conn.PgConn().ExecBatch(ctx, &batch).ReadAll()
	if err == nil {
		for _, r := range results {
			if r.Err != nil {
				return results, r.Err
			}
		}
	}
	return results, err
}

// The OIDs of the types Send sends, and of their arrays.
const (
	oidBool, oidBools               = 16, 1000
	oidBytea, oidByteas             = 17, 1001
	oidInt8, oidInt8s               = 20, 1016
	oidInt4, oidInt4s               = 23, 1007
	oidText, oidTexts               = 25, 1009
	oidTimestamptz, oidTimestamptzs = 1184, 1185
	oidDate, oidDates               = 1082, 1182
)

// Date is a day as PostgreSQL's date holds it: days since 2000-01-01.
type Date int32

// DateOf is t's day in UTC.
func DateOf(t time.Time) Date {
	const unixTo2000 = 946684800
	s := t.Unix() - unixTo2000
	d := s / 86400
	if s%86400 < 0 { // before 2000: the day it falls in, not toward zero
		d--
	}
	return Date(d)
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
	case Date:
		return binary.BigEndian.AppendUint32(buf, uint32(v)), oidDate, true
	case []Date:
		return appendArray(buf, oidDate, v, func(b []byte, d Date) []byte { return binary.BigEndian.AppendUint32(b, uint32(d)) }), oidDates, true
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
