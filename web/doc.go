// Package web is fom's admin page and JSON API, as one http.Handler that
// mounts under any prefix (NewHandler), or served on its own listener
// (NewServer, or Module for fx).
//
// Pages are rendered on the server with templ; htmx (embedded, versioned by
// content hash, never loaded from a CDN) refreshes the schedules table.
// Charts are SVG drawn on the server. Every action is also JSON under
// {prefix}/api with {code, msg, data} bodies and real status codes.
//
// Safety: the default listener binds loopback. Options can require basic
// auth or a bearer token for everything or for changes only. Changes are
// POST/PUT/PATCH/DELETE only; browser requests from another origin are
// refused; form posts carry a double-submit CSRF token. Everything an
// operator or a job controls (names, remarks, errors, task ids) is escaped
// by templ. A strict Content-Security-Policy allows no inline script.
package web
