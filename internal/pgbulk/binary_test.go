package pgbulk

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fom-go/fom/internal/pgtest"
)

type sent struct {
	s   string
	b   []byte
	i   int32
	l   int64
	t   time.Time
	d   string // read back as text
	f   bool
	tag string
}

// TestSendSendsWhatPgxReadsBack: rows sent by Send, every type it encodes
// as a column and as a scalar, read back by pgx as they were sent (empty
// values not taken for NULL), an empty array inserting no row, with the
// statements prepared (pgx's default) and parsed at each call.
func TestSendSendsWhatPgxReadsBack(t *testing.T) {
	pool := pgtest.Pool(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := pool.Config()
			cfg.ConnConfig.DefaultQueryExecMode = mode
			p, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close) // after the schema's drop, registered later
			sendEveryType(t, p)
		})
	}
}

func sendEveryType(t *testing.T, pool *pgxpool.Pool) {
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".r (s text NOT NULL, b bytea NOT NULL, i int NOT NULL, l bigint NOT NULL, t timestamptz NOT NULL, d date NOT NULL, f bool NOT NULL, tag text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 10, 0, 1, 123456789, time.UTC)
	type row struct {
		sent
		day Date
	}
	rows := []row{
		{sent{"a", []byte{0, 1, 255}, -7, 1 << 40, at, "2026-11-29", true, "x"}, DateOf(at)},
		{sent{"", []byte{}, 0, -1, at.Add(-time.Hour).In(time.FixedZone("", 3600)), "1999-12-31", false, "x"}, DateOf(time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC))},
		{sent{"ünï\tcode \"quoted\" {b}", bytes.Repeat([]byte("z"), 3000), 1 << 30, 0, time.Date(1970, 1, 1, 0, 0, 0, 1000, time.UTC), "2000-01-01", true, "x"}, DateOf(time.Date(2000, 1, 1, 0, 30, 0, 0, time.FixedZone("", -3600)))},
	}
	var q Batch
	var sel Selection
	Col(&q, &sel, "s", "text", rows, func(r *row) string { return r.s })
	ColEq(&q, &sel, "b", "bytea", rows, func(r *row) []byte { return r.b }, bytes.Equal)
	Col(&q, &sel, "i", "int", rows, func(r *row) int32 { return r.i })
	Col(&q, &sel, "l", "bigint", rows, func(r *row) int64 { return r.l })
	Col(&q, &sel, "t", "timestamptz", rows, func(r *row) time.Time { return r.t })
	Col(&q, &sel, "d", "date", rows, func(r *row) Date { return r.day })
	Col(&q, &sel, "f", "bool", rows, func(r *row) bool { return r.f })
	Col(&q, &sel, "tag", "text", rows, func(r *row) string { return r.tag }) // a scalar

	var one Batch // scalars of every type
	args := []string{one.Arg("s") + "::text", one.Arg([]byte("b")) + "::bytea", one.Arg(int32(1)) + "::int", one.Arg(int64(2)) + "::bigint",
		one.Arg(at) + "::timestamptz", one.Arg(DateOf(at)) + "::date", one.Arg(false) + "::bool", one.Arg("y") + "::text"}
	var none Batch // empty arrays
	empty := "SELECT s, b, i, l, t, d, f, '' FROM unnest(" + none.Arg([]string{}) + "::text[], " + none.Arg([][]byte{}) + "::bytea[], " + none.Arg([]int32{}) + "::int[], " +
		none.Arg([]int64{}) + "::bigint[], " + none.Arg([]time.Time{}) + "::timestamptz[], " + none.Arg([]Date{}) + "::date[], " + none.Arg([]bool{}) + "::bool[]) AS u(s, b, i, l, t, d, f)"

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var buf Buffer
	for range 2 { // the second time prepared already, the buffer reused
		if _, err := pool.Exec(ctx, "TRUNCATE "+schema+".r"); err != nil {
			t.Fatal(err)
		}
		res, err := Send(ctx, conn.Conn(), &buf,
			Statement{"INSERT INTO " + schema + ".r (s, b, i, l, t, d, f, tag) " + sel.SQL(), &q},
			Statement{"INSERT INTO " + schema + ".r VALUES (" + strings.Join(args, ", ") + ") RETURNING i, tag", &one},
			Statement{"INSERT INTO " + schema + ".r " + empty, &none},
			Statement{"SELECT count(*) FROM " + schema + ".r", nil})
		if err != nil {
			t.Fatal(err)
		}
		if n := []int64{res[0].CommandTag.RowsAffected(), res[1].CommandTag.RowsAffected(), res[2].CommandTag.RowsAffected()}; !reflect.DeepEqual(n, []int64{3, 1, 0}) {
			t.Errorf("rows inserted %v, want 3, 1 and none", n)
		}
		if got := res[1].Rows; len(got) != 1 || string(got[0][0]) != "1" || string(got[0][1]) != "y" {
			t.Errorf("returned %q, want [[1 y]]", got)
		}
		if got := res[3].Rows; len(got) != 1 || string(got[0][0]) != "4" {
			t.Errorf("counted %q, want [[4]]: the statements' results in order", got)
		}
	}
	got, err := pgx.CollectRows(must(pool.Query(ctx, "SELECT s, b, i, l, t, to_char(d, 'YYYY-MM-DD'), f, tag FROM "+schema+".r WHERE tag = 'x' ORDER BY i")), func(r pgx.CollectableRow) (sent, error) {
		var x sent
		err := r.Scan(&x.s, &x.b, &x.i, &x.l, &x.t, &x.d, &x.f, &x.tag)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		w, g := rows[i].sent, got[i]
		w.t = w.t.Truncate(time.Microsecond)
		if !w.t.Equal(g.t) || g.b == nil || !bytes.Equal(w.b, g.b) {
			t.Errorf("row %d: time %v, want %v; %d bytes, want %d", i, g.t, w.t, len(g.b), len(w.b))
		}
		w.t, g.t, w.b, g.b = time.Time{}, time.Time{}, nil, nil
		if !reflect.DeepEqual(w, g) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".r WHERE s = 's' AND b = 'b' AND i = 1 AND l = 2 AND t = $1 AND d = '2026-11-29' AND NOT f AND tag = 'y'", at).Scan(&n); err != nil || n != 1 {
		t.Errorf("scalars: %d rows (%v)", n, err)
	}
}

// TestSendNamesAParameterItCannotSend: a type Send does not encode, or one
// the statement does not read, is an error naming the statement and the
// parameter, and nothing is run.
func TestSendNamesAParameterItCannotSend(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".r (s text)"); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var float, date Batch
	float.Arg("a")
	float.Arg(1.5)
	date.Arg("2026-11-29")
	var buf Buffer
	for _, c := range []struct {
		st   Statement
		want string
	}{
		{Statement{"SELECT $1::text, $2::float8", &float}, "statement 2, parameter $2: a float64 is not sent"},
		{Statement{"SELECT $1::date", &date}, "statement 2, parameter $1: a string is sent as OID 25, the statement reads OID 1082"},
	} {
		_, err := Send(ctx, conn.Conn(), &buf, Statement{"INSERT INTO " + schema + ".r VALUES ('ran')", nil}, c.st)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".r").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows inserted (%v): a batch refused ran", n, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
