// Package control is the ABI between a running scrfs daemon and the scrfs
// command: JSON over HTTP on a Unix socket in the job's control directory
// (<control_base>/<user>/scrfs.<job>/control.sock, mode 0600, so only the
// job's user can reach it). It holds the request and response types and the
// client; the daemon serves them. docs/cli.md documents the JSON as a stable
// interface: fields are only ever added.
package control
