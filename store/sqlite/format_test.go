package sqlite

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

// TestLogRowEncodingIsThatOfTheDataFormat pins a log row's bytes: when
// they change, bump store.DataFormat (see statistics' format test).
func TestLogRowEncodingIsThatOfTheDataFormat(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	b, _ := encodeLog(nil,
		[]store.Day{{Schedule: "job", Day: day, Data: []byte{3, 1, 2}}},
		[]store.Round{{Schedule: "job", Slot: 4, First: 7, Seq: 9, Start: day.Add(time.Hour), Data: []byte{1, 5}}})
	const want = "0101036a6f62e2c4020303010202036a6f62040e128080bdfdffeb87ec31020105"
	if store.DataFormat != 2 {
		t.Fatalf("store.DataFormat is %d: pin this format's log row below", store.DataFormat)
	}
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("the stored encoding of a log row changed: bump store.DataFormat and pin the new bytes:\n%s", got)
	}
}

// A store whose rows are in a newer data format than this build's is
// refused, with both formats named, and left untouched; an older format
// is brought up to this build's.
func TestNewerDataFormatIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.db.Exec("UPDATE meta SET value = '3' WHERE key = 'data_format'"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(filepath.Join(dir, FileName))
	_, err := Open(context.Background(), dir)
	if !errors.Is(err, store.ErrNewerSchema) || !strings.Contains(err.Error(), "data format 3, this build reads up to 2") {
		t.Fatalf("got %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !bytes.Equal(before, after) {
		t.Fatal("file modified")
	}
	// A build from before the data format was recorded refuses the store
	// by its schema version.
	if SchemaVersion() < 9 {
		t.Fatalf("schema version %d: the data format's migration is missing", SchemaVersion())
	}
}
