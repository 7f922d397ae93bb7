package pgbulk

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fom-go/fom/internal/pgtest"
)

// TestExecSendsWhatPgxWouldRead: rows sent by Exec, every type it encodes
// as a column and as a scalar, read back by pgx as they were sent, empty
// values not taken for NULL, and an empty array inserting no row.
func TestExecSendsWhatPgxWouldRead(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".r (s text NOT NULL, b bytea NOT NULL, i int NOT NULL, l bigint NOT NULL, t timestamptz NOT NULL, d date NOT NULL, f bool NOT NULL, tag text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	type row struct {
		s   string
		b   []byte
		i   int32
		l   int64
		t   time.Time
		d   string
		f   bool
		tag string
	}
	at := time.Date(2026, 11, 29, 10, 0, 1, 123456789, time.UTC)
	rows := []row{
		{"a", []byte{0, 1, 255}, -7, 1 << 40, at, "2026-11-29", true, "x"},
		{"", []byte{}, 0, -1, at.Add(-time.Hour).In(time.FixedZone("", 3600)), "1999-12-31", false, "x"},
		{"ünï\tcode \"quoted\" {b}", bytes.Repeat([]byte("z"), 3000), 1 << 30, 0, time.Date(1970, 1, 1, 0, 0, 0, 1000, time.UTC), "2000-01-01", true, "x"},
	}
	var q Batch
	var sel Selection
	Col(&q, &sel, "s", "text", rows, func(r *row) string { return r.s })
	ColEq(&q, &sel, "b", "bytea", rows, func(r *row) []byte { return r.b }, bytes.Equal)
	Col(&q, &sel, "i", "int", rows, func(r *row) int32 { return r.i })
	Col(&q, &sel, "l", "bigint", rows, func(r *row) int64 { return r.l })
	Col(&q, &sel, "t", "timestamptz", rows, func(r *row) time.Time { return r.t })
	Col(&q, &sel, "d", "date", rows, func(r *row) string { return r.d })
	Col(&q, &sel, "f", "bool", rows, func(r *row) bool { return r.f })
	Col(&q, &sel, "tag", "text", rows, func(r *row) string { return r.tag }) // a scalar
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tag, buf, err := q.Exec(ctx, conn.Conn().PgConn(), "INSERT INTO "+schema+".r (s, b, i, l, t, d, f, tag) "+sel.SQL(), nil)
	if err != nil || tag.RowsAffected() != 3 {
		t.Fatalf("insert: %v, %d rows", err, tag.RowsAffected())
	}
	got, err := pgx.CollectRows(must(pool.Query(ctx, "SELECT s, b, i, l, t, to_char(d, 'YYYY-MM-DD'), f, tag FROM "+schema+".r ORDER BY i")), func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.s, &x.b, &x.i, &x.l, &x.t, &x.d, &x.f, &x.tag)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		w, g := rows[i], got[i]
		w.t = w.t.Truncate(time.Microsecond)
		if !w.t.Equal(g.t) || g.b == nil || !bytes.Equal(w.b, g.b) {
			t.Errorf("row %d: time %v, want %v; %d bytes, want %d", i, g.t, w.t, len(g.b), len(w.b))
		}
		w.t, g.t, w.b, g.b = time.Time{}, time.Time{}, nil, nil
		if !reflect.DeepEqual(w, g) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}

	// Scalars of every type, the buffer reused.
	var one Batch
	args := []string{one.Arg("s") + "::text", one.Arg([]byte("b")) + "::bytea", one.Arg(int32(1)) + "::int", one.Arg(int64(2)) + "::bigint", one.Arg(at) + "::timestamptz", one.Arg("2026-11-28") + "::date", one.Arg(false) + "::bool", one.Arg("y") + "::text"}
	if _, buf, err = one.Exec(ctx, conn.Conn().PgConn(), "INSERT INTO "+schema+".r VALUES ("+strings.Join(args, ", ")+")", buf); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".r WHERE s = 's' AND b = 'b' AND i = 1 AND l = 2 AND t = $1 AND d = '2026-11-28' AND NOT f AND tag = 'y'", at).Scan(&n); err != nil || n != 1 {
		t.Errorf("scalars: %d rows (%v)", n, err)
	}

	// Empty arrays: no row.
	var none Batch
	if tag, _, err := none.Exec(ctx, conn.Conn().PgConn(), "INSERT INTO "+schema+".r (s, b, i, l, t, f, d, tag) SELECT s, b, i, l, t, f, '2000-01-01', '' FROM unnest("+
		none.Arg([]string{})+"::text[], "+none.Arg([][]byte{})+"::bytea[], "+none.Arg([]int32{})+"::int[], "+none.Arg([]int64{})+"::bigint[], "+none.Arg([]time.Time{})+"::timestamptz[], "+none.Arg([]bool{})+"::bool[]) AS u(s, b, i, l, t, f)", buf); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("empty arrays: %v, %d rows", err, tag.RowsAffected())
	}
}

// TestExecNamesAParameterItCannotSend: a type Exec does not encode is an
// error naming the parameter, and nothing is sent.
func TestExecNamesAParameterItCannotSend(t *testing.T) {
	var b Batch
	b.Arg("a")
	b.Arg(1.5)
	_, _, _, err := b.encode(nil)
	if err == nil || !strings.Contains(err.Error(), "parameter $2: a float64") {
		t.Fatalf("got %v, want an error naming $2 and float64", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
