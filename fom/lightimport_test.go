package fom

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLightImport: a program that imports only package fom links none of
// PostgreSQL (pgx, the cluster's coordinator: store/postgres brings them),
// Prometheus, OpenTelemetry or the admin page (web, promstat and otelfom,
// imported by the apps that use them).
func TestLightImport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/fom-go/fom/internal/lightimport").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/a-h/templ", "github.com/go-chi/chi", "github.com/danielgtaylor/huma", "github.com/jackc/pgx", "github.com/fom-go/fom/cluster/pgcluster", "github.com/fom-go/fom/store/postgres"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("a program importing only fom links %s", d)
			}
		}
	}
	t.Logf("%d packages", len(deps))
}
