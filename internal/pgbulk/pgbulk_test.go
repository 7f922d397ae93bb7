package pgbulk

import (
	"bytes"
	"reflect"
	"testing"
)

type row struct {
	id   string
	kind string
	at   int64
}

func TestAColumnCommonToEveryRowIsSentOnce(t *testing.T) {
	rows := []row{{"a", "k", 1}, {"b", "k", 2}}
	var b Batch
	var sel Selection
	id := Col(&b, &sel, "id", "text", rows, func(r *row) string { return r.id })
	Col(&b, &sel, "kind", "text", rows, func(r *row) string { return r.kind })
	Col(&b, &sel, "at", "bigint", rows, func(r *row) int64 { return r.at })
	owner := b.Arg("me")
	if got, want := sel.SQL(), `SELECT id, $2::text AS kind, at FROM unnest($1::text[], $3::bigint[]) AS u(id, at)`; got != want {
		t.Errorf("SQL\n got %s\nwant %s", got, want)
	}
	if want := []any{[]string{"a", "b"}, "k", []int64{1, 2}, "me"}; !reflect.DeepEqual(b.Args, want) || owner != "$4" {
		t.Errorf("args %#v (owner %s), want %#v ($4)", b.Args, owner, want)
	}
	// A second selection reusing a column already sent.
	var other Selection
	other.Use(id)
	Col(&b, &other, "at", "bigint", rows, func(r *row) int64 { return 7 })
	if got, want := other.SQL(), `SELECT id, $5::bigint AS at FROM unnest($1::text[]) AS u(id)`; got != want {
		t.Errorf("reuse\n got %s\nwant %s", got, want)
	}
}

func TestBytesAreComparedByTheirEq(t *testing.T) {
	type blob struct{ b []byte }
	for _, c := range []struct {
		rows []blob
		want string
	}{
		{[]blob{{[]byte("x")}, {[]byte("x")}}, `SELECT $1::bytea AS b`},
		{[]blob{{[]byte("x")}, {[]byte("y")}}, `SELECT b FROM unnest($1::bytea[]) AS u(b)`},
	} {
		var b Batch
		var sel Selection
		ColEq(&b, &sel, "b", "bytea", c.rows, func(r *blob) []byte { return r.b }, bytes.Equal)
		if got := sel.SQL(); got != c.want {
			t.Errorf("SQL\n got %s\nwant %s", got, c.want)
		}
	}
}

func TestABatchOfOneIsScalarsOnly(t *testing.T) {
	var b Batch
	var sel Selection
	Col(&b, &sel, "id", "text", []row{{id: "a"}}, func(r *row) string { return r.id })
	if got, want := sel.SQL(), `SELECT $1::text AS id`; got != want || !reflect.DeepEqual(b.Args, []any{"a"}) {
		t.Errorf("got %s %#v, want %s [a]", got, b.Args, want)
	}
}
