package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/internal/jobdir"
	"github.com/scrfs/scrfs/transfer"
	"golang.org/x/sys/unix"
)

// serveControl listens on the control socket, which it binds inside the
// store's verified control directory (through the open directory, so it
// lands there whatever happens to the path) with mode 0600, and serves only
// the peers checkPeer lets through. The daemon holds the control
// directory's lock, so a socket file already there is a leftover of a
// crashed daemon. A socket needs no data block, but its directory entry
// may: on a full control file system the daemon starts without it, says so
// loudly, and binds it as soon as it can (the mount serves meanwhile).
func (d *Daemon) serveControl() (stop func(), err error) {
	dir := d.store.ControlDir()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("POST /v1/complete", d.handleComplete)
	mux.HandleFunc("POST /v1/flush", d.handleFlushRequest)
	mux.HandleFunc("GET /v1/flush", d.handleFlushProgress)
	srv := &http.Server{
		Handler:           d.checkPeer(mux),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext:       withPeerCred,
	}
	var wg sync.WaitGroup
	serve := func(ln net.Listener) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Serve(ln) // closes ln when the server shuts down
		}()
	}
	quit := make(chan struct{})
	ln, err := listenControl(dir)
	switch {
	case err == nil:
		serve(ln)
	case !storageFull(err):
		return nil, err
	default:
		d.log.Error("control socket cannot be created: scrfs status, flush and complete cannot reach this daemon until it can; the mount keeps serving",
			"socket", dir.Join(control.SocketName), "err", err,
			"fix", "free space on the control directory's file system; scrfs retries every "+controlRetry.String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ln := d.retryControl(quit); ln != nil {
				serve(ln)
			}
		}()
	}
	return func() {
		close(quit)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		wg.Wait()
		dir.Remove(control.SocketName)
	}, nil
}

// controlRetry is how often a daemon without its control socket tries to
// bind it again.
const controlRetry = 2 * time.Second

// retryControl binds the control socket every controlRetry until it can
// (and returns it) or quit is closed (nil).
func (d *Daemon) retryControl(quit <-chan struct{}) net.Listener {
	t := time.NewTicker(controlRetry)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return nil
		case <-t.C:
		}
		if ln, err := listenControl(d.store.ControlDir()); err == nil {
			d.log.Info("control socket created: the daemon answers scrfs commands again", "socket", d.store.ControlDir().Join(control.SocketName))
			return ln
		}
	}
}

// listenControl binds the control socket in dir with mode 0600, replacing
// a leftover one.
func listenControl(dir *jobdir.Dir) (net.Listener, error) {
	sock, err := dir.SocketPath(control.SocketName)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	dir.Remove(control.SocketName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", dir.Join(control.SocketName), err)
	}
	// The listener must not unlink by the /proc path at Close: stop
	// removes the socket through the directory.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := dir.Chmod(control.SocketName, 0o600); err != nil {
		ln.Close()
		dir.Remove(control.SocketName)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// storageFull reports an error of a file system that has no room, or takes
// no writes, for what the daemon keeps in its control directory.
func storageFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// peerCredKey is the context key of a control connection's credentials.
type peerCredKey struct{}

// withPeerCred records the connecting process's credentials (SO_PEERCRED,
// taken by the kernel at connect time, so they cannot be forged) in the
// connection's context; a connection whose credentials cannot be read gets
// none and is refused.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerCredKey{}, cred)
}

// checkPeer serves only the daemon's own user, and root if
// control.allow_root: the socket's mode keeps other users out already, but
// root passes any mode, and a socket may be reached by other means (a
// descriptor passed on). Anyone else gets EACCES and a line in the log.
func (d *Daemon) checkPeer(next http.Handler) http.Handler {
	own := uint32(os.Geteuid())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, _ := r.Context().Value(peerCredKey{}).(*unix.Ucred)
		switch {
		case cred != nil && (cred.Uid == own || cred.Uid == 0 && d.cfg.Control.AllowRoot):
			next.ServeHTTP(w, r)
			return
		case cred == nil:
			writeJSON(w, http.StatusForbidden, control.Error{Err: "control socket: the caller's credentials cannot be read", Errno: int32(syscall.EACCES)})
		default:
			msg := fmt.Sprintf("control socket: uid %d may not use this daemon, which runs as uid %d", cred.Uid, own)
			if cred.Uid == 0 {
				msg += "; set control.allow_root = true (SCRFS_CONTROL_ALLOW_ROOT=true) in the daemon's configuration to let root"
			}
			writeJSON(w, http.StatusForbidden, control.Error{Err: msg, Errno: int32(syscall.EACCES)})
		}
		var uid, pid int32 = -1, -1
		if cred != nil {
			uid, pid = int32(cred.Uid), cred.Pid
		}
		d.log.Warn("control request refused", "uid", uid, "pid", pid, "path", r.URL.Path)
	})
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, d.status())
}

func (d *Daemon) handleComplete(w http.ResponseWriter, r *http.Request) {
	var req control.CompleteRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := d.node.Complete.Complete(r.Context(), req.Name); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// status assembles what `scrfs status` shows.
func (d *Daemon) status() control.Status {
	host, _ := os.Hostname()
	st := control.Status{
		Node: control.Node{
			Index: d.self, Nodes: d.size, Hostname: host, PID: os.Getpid(), Version: d.version,
			Job: d.cfg.Job.ID, Mountpoint: d.mountpoint, CacheDir: d.cacheDir, ControlDir: d.controlDir,
			Prefix: d.cfg.Paths.Prefix, Started: d.started, Uptime: time.Since(d.started).Seconds(),
			DataPath: d.dataPath(), RedundancyPath: d.node.Protect.DataPath(), Scheme: d.cfg.EffectiveScheme(d.size), CacheSize: d.cfg.Datasets.CacheSize,
			Metrics: d.metricsAddr, Ready: d.ready.Load(),
		},
		Datasets: []control.Dataset{},
		Failed:   []control.Dataset{},
		Peers:    d.peerStatus(),
	}
	if d.mount != nil {
		st.Node.Mountpoint = d.mount.Dir()
	}
	if r := d.node.Flusher.Restored(); r != nil {
		st.Node.Restored = &control.Restored{Dataset: r.Dataset, From: r.From, Reason: r.Reason}
	}
	st.Node.TakingStock = d.node.Protect.TakingStock()
	if p := d.node.Flusher.Fetching(); p != nil {
		st.Node.Fetching = &control.Fetching{Dataset: p.Dataset, DoneBytes: p.Done, TotalBytes: p.Total, BytesPerSecond: p.Rate}
	}
	if ro, active := d.store.ReadOnly(); active {
		st.Node.ReadOnly = &control.ReadOnly{Since: ro.Since, Reason: ro.Reason, Error: ro.Err.Error(), FailedWrites: ro.Failures}
	}
	if sp, err := d.store.Space(); err == nil {
		st.Node.Cache = control.Cache{UsedBytes: sp.Used, CapacityBytes: sp.Capacity, AvailableBytes: sp.Available}
	}
	for _, ds := range d.store.Datasets() {
		row := datasetStatus(ds.Info())
		if v := d.node.Namespace.View(row.Name); v != nil {
			row.JobFiles, row.JobBytes = v.Files()
			row.SharedFiles = v.SharedFiles()
		}
		st.Datasets = append(st.Datasets, row)
	}
	d.addRebuilds(&st)
	d.addFlushRates(&st)
	for _, info := range d.store.Failures() {
		st.Failed = append(st.Failed, datasetStatus(info))
	}
	return st
}

func datasetStatus(info cache.Info) control.Dataset {
	out := control.Dataset{
		Name: info.Name, State: string(info.State.Shown()), Files: info.Files, Bytes: info.Bytes,
		ID: info.ID, Seq: info.Seq, Kind: string(info.Kind), Root: info.Root, Created: info.Created, Completed: info.Completed,
		Age: time.Since(info.Created).Seconds(), Reason: info.Reason, Completing: info.Completing,
		OpenWrite: info.Writers,
	}
	if info.Flush.State != "" {
		f := flushABI(transfer.Progress{FlushStatus: info.Flush})
		out.Flush = &f
	}
	return out
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, control.Error{Err: "bad request: " + err.Error(), Errno: int32(syscall.EINVAL)})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// writeError answers with the error text and the errno a caller can test.
func writeError(w http.ResponseWriter, err error) {
	code, errno := http.StatusInternalServerError, syscall.EIO
	if e, ok := cache.Errno(err); ok {
		errno = e
		switch e {
		case syscall.ENOENT:
			code = http.StatusNotFound
		case syscall.EROFS, syscall.EEXIST, syscall.ENOTEMPTY, syscall.EBUSY:
			code = http.StatusConflict
		case syscall.ENOSPC:
			code = http.StatusInsufficientStorage
		}
	}
	writeJSON(w, code, control.Error{Err: err.Error(), Errno: int32(errno)})
}

// addRebuilds shows rebuilds under way: on the datasets' rows where this
// node is a survivor, as rows of state "rebuilding" where it is restored.
func (d *Daemon) addRebuilds(st *control.Status) {
	for _, p := range d.node.Protect.Rebuilding() {
		prog := &control.Progress{DoneBytes: p.Done, TotalBytes: p.Total, Started: p.Started}
		found := false
		for i := range st.Datasets {
			if st.Datasets[i].Name == p.Route.Name {
				st.Datasets[i].Rebuild, found = prog, true
			}
		}
		if !found {
			st.Datasets = append(st.Datasets, control.Dataset{Name: p.Route.Name, State: "rebuilding",
				Kind: string(p.Route.Kind), Root: p.Route.Root, Created: p.Started, Rebuild: prog})
		}
	}
}
