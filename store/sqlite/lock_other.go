//go:build !unix

package sqlite

import (
	"fmt"
	"os"
)

// lockFile creates path but takes no lock: on this platform nothing keeps
// a second process off the same data directory.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fom: store lock %s: %w", path, err)
	}
	return f, nil
}
