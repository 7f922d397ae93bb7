// Package pgtest gives tests a PostgreSQL database: the address in
// FOM_TEST_DATABASE_URL (default the loopback server a development machine
// and CI run), a schema of their own per test, and a skip with a message
// saying how to run them when no server answers; under CI=true a missing
// server fails the test instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DSN is the test database's address.
func DSN() string {
	if v := os.Getenv("FOM_TEST_DATABASE_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Pool connects to the test database for t, or skips (fails under CI=true).
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, DSN())
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		msg := "no PostgreSQL at " + DSN() + " (" + err.Error() + "): start one, or point FOM_TEST_DATABASE_URL at one"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema returns a new schema name for t, dropped with everything in it
// when t ends.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "fomtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
	})
	return name
}
