// Command lightimport is the smallest fom program: one job, importing
// only package fom. TestLightImport checks what it links.
package main

import (
	"context"
	"fmt"

	"github.com/fom-go/fom/fom"
)

type Hello struct {
	fom.Schedule `cron:"*/5 * * * * *"`
}

func (Hello) Run(context.Context) error { fmt.Println("hello"); return nil }

func main() {
	app, err := fom.New()
	if err != nil {
		panic(err)
	}
	app.Register(&Hello{})
	app.Start(context.Background())
	select {}
}
