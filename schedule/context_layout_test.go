package schedule

import (
	"testing"
	"unsafe"
)

// TestContextLayout: a Context fills a 448-byte size class (its hooks, a
// pointer away, 48 bytes at most), a loop a 256-byte one and a
// generation (with its pool) a 320-byte one, classes whose objects start
// on a cache line, and what a fire reads or writes of
// a Context is in its first six lines, of a generation in its first, with
// its pool from the third (see Context and generation).
func TestContextLayout(t *testing.T) {
	var c Context
	if n := unsafe.Sizeof(c); n != 448 {
		t.Errorf("a Context is %d bytes, want 448", n)
	}
	end := func(off, size uintptr) uintptr { return off + size }
	for name, e := range map[string]uintptr{
		"mu":   end(unsafe.Offsetof(c.mu), unsafe.Sizeof(c.mu)),
		"dead": end(unsafe.Offsetof(c.dead), unsafe.Sizeof(c.dead)),
		"gen":  end(unsafe.Offsetof(c.gen), unsafe.Sizeof(c.gen)),
		"plan": end(unsafe.Offsetof(c.plan), unsafe.Sizeof(c.plan)),
	} {
		if e > 64 {
			t.Errorf("%s ends at byte %d, past the first line", name, e)
		}
	}
	if e := end(unsafe.Offsetof(c.job), unsafe.Sizeof(c.job)); e > 6*64 {
		t.Errorf("job ends at byte %d, past the sixth line", e)
	}
	if n := unsafe.Sizeof(hooks{}); n > 48 {
		t.Errorf("a Context's hooks are %d bytes, want the 48-byte class at most", n)
	}
	if n := unsafe.Sizeof(loop{}); n != 256 {
		t.Errorf("a loop is %d bytes, want 256", n)
	}
	var g generation
	if n := unsafe.Sizeof(g); n <= 288 || n > 320 {
		t.Errorf("a generation is %d bytes, want the 320-byte class (289 to 320)", n)
	}
	if o := unsafe.Offsetof(g.pool); o != 128 {
		t.Errorf("a generation's pool starts at byte %d, want 128", o)
	}
	if e := unsafe.Offsetof(g.tmo) + unsafe.Sizeof(g.tmo); e > 64 {
		t.Errorf("a generation's tmo ends at byte %d, past the first line", e)
	}
	if n := unsafe.Sizeof(runCtx{}); n != 64 {
		t.Errorf("a task context is %d bytes, want 64 (a class whose objects start on a line)", n)
	}
	for _, o := range Outcomes() {
		if got := codeOf(o).outcome(); got != o {
			t.Errorf("outcome %q comes back as %q", o, got)
		}
	}
	if got := outcomeCode(0).outcome(); got != "" {
		t.Errorf("no outcome comes back as %q", got)
	}
}
