package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/fom-go/fom/fom"
)

// BenchmarkTableRefresh1000 is one self-refresh of the schedules table of
// an app with 1 000 schedules, as the page sends it (the first page of
// 100 rows): its time and its bytes.
//
//	go test -run '^$' -bench TableRefresh -benchmem ./web
func BenchmarkTableRefresh1000(b *testing.B) {
	app, err := fom.New(fom.WithDataDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer app.Stop(context.Background())
	for i := range 1000 {
		if _, err := app.Register(&alpha{}, fom.Named(fmt.Sprintf("job-%04d", i))); err != nil {
			b.Fatal(err)
		}
	}
	if err := app.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	h, err := NewHandler(app, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var size int
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest("GET", "/fom/fragments/schedules", nil)
		req.Host = testHost
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/refresh")
}
