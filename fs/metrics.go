package fs

import (
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// op names one FUSE operation in metrics. The set is fixed, so the op label
// has low cardinality.
type op uint8

const (
	opLookup op = iota
	opGetattr
	opSetattr
	opMkdir
	opRmdir
	opCreate
	opOpen
	opRelease
	opRead
	opWrite
	opFsync
	opUnlink
	opRename
	opLink
	opSymlink
	opReadlink
	opReaddir
	opMknod
	opStatfs
	opAllocate
	opLseek
	numOps
)

var opNames = [numOps]string{
	"lookup", "getattr", "setattr", "mkdir", "rmdir", "create", "open", "release",
	"read", "write", "fsync", "unlink", "rename", "link", "symlink", "readlink",
	"readdir", "mknod", "statfs", "allocate", "lseek",
}

// metrics are the FUSE-side series. Per-op children are resolved once, so
// recording an operation costs two atomic adds and a histogram observe.
type metrics struct {
	ops       [numOps]prometheus.Counter
	durations [numOps]prometheus.Observer
	errors    *prometheus.CounterVec
	written   prometheus.Counter
	read      prometheus.Counter
	created   prometheus.Counter
	all       []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) *metrics {
	opsVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "scrfs", Subsystem: "fuse", Name: "ops_total",
		Help: "FUSE operations served, by operation.",
	}, []string{"op"})
	durVec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "scrfs", Subsystem: "fuse", Name: "op_duration_seconds",
		Help: "Time the daemon spent serving a FUSE operation, by operation.",
		// 2 µs to ~2 s: metadata ops take microseconds, a 1 MiB write on a
		// slow cache device or an fsync can take hundreds of milliseconds.
		Buckets: prometheus.ExponentialBuckets(2e-6, 4, 11),
	}, []string{"op"})
	m := &metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "fuse", Name: "errors_total",
			Help: "FUSE operations that returned an error, by operation and errno name.",
		}, []string{"op", "errno"}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "fuse", Name: "written_bytes_total",
			Help: "Bytes written through the daemon's data path (not counted under passthrough; see scrfs_dataset_written_bytes_total).",
		}),
		read: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "fuse", Name: "read_bytes_total",
			Help: "Bytes read through the daemon's data path (reads under passthrough bypass the daemon and are not counted).",
		}),
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "scrfs", Subsystem: "fuse", Name: "created_files_total",
			Help: "Files created through the mount.",
		}),
	}
	for i := range numOps {
		m.ops[i] = opsVec.WithLabelValues(opNames[i])
		m.durations[i] = durVec.WithLabelValues(opNames[i])
	}
	m.all = []prometheus.Collector{opsVec, durVec, m.errors, m.written, m.read, m.created}
	if reg != nil {
		for _, c := range m.all {
			reg.MustRegister(c)
		}
	}
	return m
}

// observe records one operation; use as `defer f.observe(opX, time.Now(), &errno)`.
func (f *FS) observe(o op, start time.Time, errno *syscall.Errno) {
	m := f.metrics
	m.ops[o].Inc()
	m.durations[o].Observe(time.Since(start).Seconds())
	// A lookup of a missing name is an answer, not an error.
	if *errno != 0 && (o != opLookup || *errno != syscall.ENOENT) {
		m.errors.WithLabelValues(opNames[o], errnoName(*errno)).Inc()
	}
}

// errnoName gives the symbolic name of common errno values ("ENOSPC"), which
// dashboards read better than numbers.
func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EEXIST:
		return "EEXIST"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EDQUOT:
		return "EDQUOT"
	case syscall.EFBIG:
		return "EFBIG"
	case syscall.EIO:
		return "EIO"
	case syscall.ENOTEMPTY:
		return "ENOTEMPTY"
	case syscall.EXDEV:
		return "EXDEV"
	case syscall.EISDIR:
		return "EISDIR"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EBADF:
		return "EBADF"
	case syscall.ENODATA:
		return "ENODATA"
	case syscall.ENOTSUP:
		return "ENOTSUP"
	case syscall.ENAMETOOLONG:
		return "ENAMETOOLONG"
	case syscall.EBUSY:
		return "EBUSY"
	}
	return "errno_" + strconv.Itoa(int(e))
}
