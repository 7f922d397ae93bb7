// Package pgbulk builds the statements that send a batch's rows to
// PostgreSQL as arrays, a column each, read back by unnest: one
// statement whatever the batch's size. A column whose values are the
// same in every row (the namespace, kind and policy of timers made
// together, the state and error of attempts that succeeded, the planned
// instant of an aligned burst) is sent once, as a scalar: the arrays are
// most of what a batch costs the client, and decoding them a good part of
// what it costs the server.
package pgbulk

import (
	"strconv"
	"strings"
)

// Batch is a statement's parameters, in order.
type Batch struct {
	Args []any
}

// Column is a parameter holding a column: an array of its values, or
// the one value of all rows.
type Column struct {
	name  string
	param string // "$n::type[]", or "$n::type" for a scalar
	array bool
}

// Selection is one SELECT over columns, some unnested from arrays.
type Selection struct {
	cols []Column
}

// Col adds to sel the column name of type typ, read from rows by get.
func Col[R any, T comparable](b *Batch, sel *Selection, name, typ string, rows []R, get func(*R) T) Column {
	return ColEq(b, sel, name, typ, rows, get, func(x, y T) bool { return x == y })
}

// ColEq is Col for values compared by eq (a []byte by bytes.Equal).
func ColEq[R, T any](b *Batch, sel *Selection, name, typ string, rows []R, get func(*R) T, eq func(T, T) bool) Column {
	v0 := get(&rows[0])
	same := true
	for i := 1; i < len(rows) && same; i++ {
		same = eq(get(&rows[i]), v0)
	}
	c := Column{name: name}
	if same {
		c.param = b.Arg(v0) + "::" + typ
	} else {
		vs := make([]T, len(rows))
		for i := range rows {
			vs[i] = get(&rows[i])
		}
		c.param, c.array = b.Arg(vs)+"::"+typ+"[]", true
	}
	sel.Use(c)
	return c
}

// Arg adds a parameter and returns its placeholder.
func (b *Batch) Arg(v any) string {
	b.Args = append(b.Args, v)
	return "$" + strconv.Itoa(len(b.Args))
}

// Use adds an existing column (a parameter already sent) to sel.
func (sel *Selection) Use(c Column) { sel.cols = append(sel.cols, c) }

// SQL is the SELECT of sel's columns, in order.
func (sel *Selection) SQL() string {
	var out, arrays, names []string
	for _, c := range sel.cols {
		if c.array {
			arrays, names = append(arrays, c.param), append(names, c.name)
			out = append(out, c.name)
		} else {
			out = append(out, c.param+" AS "+c.name)
		}
	}
	q := `SELECT ` + strings.Join(out, ", ")
	if len(arrays) > 0 {
		q += ` FROM unnest(` + strings.Join(arrays, ", ") + `) AS u(` + strings.Join(names, ", ") + `)`
	}
	return q
}
