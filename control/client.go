package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"

	"github.com/scrfs/scrfs/internal/jobdir"
)

// ErrNoDaemon means nothing listens on the control socket: no daemon runs
// for this job on this node (or it runs with another control directory).
var ErrNoDaemon = errors.New("no scrfs daemon is running for this job on this node")

// Client talks to the daemon whose control directory is Dir.
type Client struct {
	dir  string
	http *http.Client
}

// NewClient returns a client for the daemon with control directory dir. On
// every connection it verifies the directory (dir.Inspect: no links, no one
// else may write to it) and reaches the socket through the open directory,
// so a socket another user planted or moved is never talked to.
func NewClient(dir jobdir.Path) *Client {
	return &Client{dir: dir.String(), http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d, err := dir.Inspect()
			if err != nil {
				return nil, err
			}
			defer d.Close()
			sock, err := d.SocketPath(SocketName)
			if err != nil {
				return nil, err
			}
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		},
	}}}
}

// Status fetches the daemon's status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	return &st, c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
}

// Complete asks the daemon to complete dataset name.
func (c *Client) Complete(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/complete", CompleteRequest{Name: name}, nil)
}

// do sends one request and decodes the JSON answer into out (unless nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://scrfs"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ue := (*jobdir.UnsafeError)(nil); errors.As(err, &ue) {
			return fmt.Errorf("control directory: %w", ue)
		}
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w (control socket %s)", ErrNoDaemon, filepath.Join(c.dir, SocketName))
		}
		return fmt.Errorf("control socket %s: %w", filepath.Join(c.dir, SocketName), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{}
		if json.Unmarshal(data, e) != nil || e.Err == "" {
			e.Err = fmt.Sprintf("daemon answered %s", resp.Status)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode daemon answer to %s: %w", path, err)
	}
	return nil
}
