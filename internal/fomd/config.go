package fomd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// Config is what fomd runs with: flags, each also an environment variable
// FOMD_<NAME> (upper case, dashes as underscores); a flag wins.
type Config struct {
	Addr        string // where the API, the page and the probes listen
	DataDir     string // SQLite store and the generated admin token
	DatabaseURL string // PostgreSQL instead of SQLite: several instances share it
	Schema      string // the PostgreSQL schema of fomd's tables
	AdminToken  string // generated and saved in DataDir when empty
	InstanceID  string
	// AllowPrivate lets callbacks reach loopback, private, link-local and
	// other special-purpose addresses; Allow lets only these ranges.
	AllowPrivate bool
	Allow        []netip.Prefix
	// MaxBody bounds a request body (413 above it).
	MaxBody int64
	// MaxConcurrent bounds the callbacks under way at once.
	MaxConcurrent int
	// Defaults of a namespace created without limits (0: none).
	DefaultRate        float64
	DefaultBurst       int
	DefaultConcurrency int
	DefaultMaxTimers   int64
	// ShutdownTimeout is how long a SIGTERM waits for deliveries under way.
	ShutdownTimeout time.Duration
	// Refresh is how often namespaces are re-read from the store (their
	// limits and secrets, changed by another instance).
	Refresh time.Duration
	// Lease is how long a fire claimed by an instance that died waits
	// before another takes it over (after its due time, or its attempt's
	// timeout).
	Lease   time.Duration
	LogJSON bool
}

// DefaultConfig is fomd's configuration before flags.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:8090",
		DataDir:         "fomd-data",
		Schema:          "fomd",
		MaxBody:         1 << 20,
		MaxConcurrent:   512,
		ShutdownTimeout: 30 * time.Second,
		Refresh:         2 * time.Second,
		Lease:           30 * time.Second,
	}
}

// ParseConfig reads args and the environment (getenv) over DefaultConfig.
func ParseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("fomd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var allow string
	fs.StringVar(&c.Addr, "addr", c.Addr, "`host:port` to listen on (port 0: any free port)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "`dir` of the SQLite store and the generated admin token")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL `URL`: several instances share the timers (default: SQLite in --data-dir)")
	fs.StringVar(&c.Schema, "schema", c.Schema, "PostgreSQL `schema` of fomd's tables")
	fs.StringVar(&c.AdminToken, "admin-token", "", "the admin bearer `token` (default: generated and saved in --data-dir)")
	fs.StringVar(&c.InstanceID, "instance-id", "", "this instance's `id` among those sharing PostgreSQL (default: host-pid)")
	fs.BoolVar(&c.AllowPrivate, "allow-private-callbacks", false, "let callbacks reach loopback, private and link-local addresses")
	fs.StringVar(&allow, "allow-cidrs", "", "comma-separated `CIDRs` callbacks may reach although private (e.g. 10.1.0.0/16)")
	fs.Int64Var(&c.MaxBody, "max-body", c.MaxBody, "largest request body in `bytes` (413 above)")
	fs.IntVar(&c.MaxConcurrent, "max-concurrent", c.MaxConcurrent, "callbacks under way at once, in all")
	fs.Float64Var(&c.DefaultRate, "default-rate", 0, "a new namespace's deliveries per second (0: no limit)")
	fs.IntVar(&c.DefaultBurst, "default-burst", 0, "a new namespace's burst above its rate")
	fs.IntVar(&c.DefaultConcurrency, "default-concurrency", 0, "a new namespace's deliveries under way at once (0: no limit)")
	fs.Int64Var(&c.DefaultMaxTimers, "default-max-timers", 0, "a new namespace's quota of timers (0: none)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long SIGTERM waits for deliveries under way")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "how long a dead instance's claimed fires wait before another instance takes them over")
	fs.BoolVar(&c.LogJSON, "log-json", false, "log JSON lines (default: console)")
	// The environment first, so that a flag given overrides it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "FOMD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(allow, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return c, fmt.Errorf("--allow-cidrs: %q is not a CIDR: %w", s, err)
		}
		c.Allow = append(c.Allow, p)
	}
	return c, c.check()
}

func (c Config) check() error {
	var errs []error
	if c.MaxBody < 1024 {
		errs = append(errs, fmt.Errorf("--max-body %d: at least 1024 bytes", c.MaxBody))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent %d: at least 1", c.MaxConcurrent))
	}
	if c.DefaultRate < 0 || c.DefaultBurst < 0 || c.DefaultConcurrency < 0 || c.DefaultMaxTimers < 0 {
		errs = append(errs, errors.New("--default-rate, --default-burst, --default-concurrency and --default-max-timers must not be negative"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout))
	}
	if c.Lease < time.Second {
		errs = append(errs, fmt.Errorf("--lease %s: at least 1s", c.Lease))
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		errs = append(errs, fmt.Errorf("--admin-token: %d characters; at least 16", len(c.AdminToken)))
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is empty and no --database-url is given"))
	}
	return errors.Join(errs...)
}
