package postgres

import (
	"strconv"
	"strings"
)

// A batch's rows (timers inserted, outcomes recorded) are sent as arrays,
// a column each, and read back by unnest: one statement, whatever the
// batch's size. A column whose
// values are the same in every row (the namespace, the kind, the policy
// of timers made together, the state and error of attempts that
// succeeded) is sent once, as a scalar: the arrays are most of what a
// batch costs the client, and decoding them a good part of what it costs
// the server.
type bulk struct {
	args []any
}

// column is a parameter holding a column: an array of its values, or
// the one value of all rows.
type column struct {
	name  string
	param string // "$n::type[]", or "$n::type" for a scalar
	array bool
}

// selection is one SELECT over columns, some unnested from arrays.
type selection struct {
	cols []column
}

// addCol adds to sel the column name of type typ, read from rows by get.
func addCol[R any, T comparable](b *bulk, sel *selection, name, typ string, rows []R, get func(*R) T) column {
	v0 := get(&rows[0])
	same := true
	for i := 1; i < len(rows) && same; i++ {
		same = get(&rows[i]) == v0
	}
	return b.add(sel, name, typ, same, v0, func() any {
		vs := make([]T, len(rows))
		for i := range rows {
			vs[i] = get(&rows[i])
		}
		return vs
	})
}

// arg adds a parameter and returns its placeholder.
func (b *bulk) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// add adds to sel the column name of type typ: first, when every row
// has it (same), or else the array that values makes.
func (b *bulk) add(sel *selection, name, typ string, same bool, first any, values func() any) column {
	c := column{name: name}
	if same {
		b.args = append(b.args, first)
		c.param = "$" + strconv.Itoa(len(b.args)) + "::" + typ
	} else {
		b.args = append(b.args, values())
		c.param, c.array = "$"+strconv.Itoa(len(b.args))+"::"+typ+"[]", true
	}
	sel.use(c)
	return c
}

// use adds an existing column (a parameter already sent) to sel.
func (sel *selection) use(c column) { sel.cols = append(sel.cols, c) }

// sql is the SELECT of sel's columns, in order.
func (sel *selection) sql() string {
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
