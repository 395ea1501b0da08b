package layout

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// MetaDir is the name of the hidden directory scrfs keeps inside every
// dataset directory (in the cache and in the prefix) and at the top of the
// prefix. Applications never see it through the mount.
const MetaDir = ".scrfs"

// JobDir returns <base>/<user>/scrfs.<job>, the per-user, per-job directory
// under a cache or control base (SCR: <base>/<user>/scr.<allocation>). Two jobs
// of one user, or two users on one node, never share it.
func JobDir(base, user, job string) string {
	return filepath.Join(base, user, JobDirName(job))
}

// JobDirName returns the last component of JobDir: scrfs.<job>.
func JobDirName(job string) string { return "scrfs." + job }

// DatasetDir returns the cache directory of dataset name under a job's cache
// directory.
func DatasetDir(cacheDir, name string) string {
	return filepath.Join(cacheDir, name)
}

// DatasetMetaDir returns the directory that holds a dataset's redundancy files
// and scrfs metadata: <dataset>/.scrfs.
func DatasetMetaDir(datasetDir string) string {
	return filepath.Join(datasetDir, MetaDir)
}

// RecordFile is the name of a dataset's record (package record) in its
// metadata directory, and in the prefix's manifest directory of it.
const RecordFile = "record.json"

// DatasetRecord returns where a dataset directory keeps its record.
func DatasetRecord(datasetDir string) string {
	return filepath.Join(DatasetMetaDir(datasetDir), RecordFile)
}

// HostedRoot returns where a node keeps, inside its copy of a dataset (the
// dataset directory datasetDir), the shares it rebuilt for nodes gone from
// the job: one directory each, named by the member's identity (HostedDir).
func HostedRoot(datasetDir string) string {
	return filepath.Join(DatasetMetaDir(datasetDir), "hosted")
}

// HostedDir returns where a node keeps the share of member id of the
// dataset in datasetDir that it rebuilt for a node gone from the job.
func HostedDir(datasetDir, id string) string {
	return filepath.Join(HostedRoot(datasetDir), id)
}

// PrefixDatasetDir returns where dataset name is flushed to in the prefix
// directory: <prefix>/<name>, the tree the application wrote.
func PrefixDatasetDir(prefix, name string) string {
	return filepath.Join(prefix, name)
}

// PrefixIsS3 reports whether prefix names S3-compatible object storage
// ("s3://bucket/path") rather than a directory; the other prefix
// functions here are for directories.
func PrefixIsS3(prefix string) bool { return strings.HasPrefix(prefix, "s3://") }

// PrefixMetaDir returns <prefix>/.scrfs, which holds the job index, the
// manifests and the job secret.
func PrefixMetaDir(prefix string) string {
	return filepath.Join(prefix, MetaDir)
}

// CheckDatasetName reports whether name can name a dataset: one path
// component, not empty, not "." or "..", not scrfs's own MetaDir, at most 255
// bytes and free of NUL and '/'.
func CheckDatasetName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("dataset name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("dataset name %q is not allowed", name)
	case name == MetaDir:
		return fmt.Errorf("dataset name %q is reserved for scrfs", name)
	case len(name) > 255:
		return fmt.Errorf("dataset name %.20q... is longer than 255 bytes", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("dataset name %q contains '/' or NUL", name)
	}
	return nil
}

// How a dataset sits in the mount, as cache.Kind, the prefix index and the
// protocols' messages name it.
const (
	RouteDir  = "dir"  // the dataset owns one directory (its root) and all below
	RouteFlat = "flat" // its files sit directly in a shared directory (its root)
)

// CheckRoute reports whether kind and root can anchor dataset name: a known
// kind (or none, with no root), a root that is a clean relative path without
// "..", and for a directory dataset a root whose last component is the
// dataset's name. Names and routes read from disk or from a peer go through
// it (and CheckDatasetName) before any path is built from them.
func CheckRoute(name, kind, root string) error {
	if err := CheckDatasetName(name); err != nil {
		return err
	}
	switch kind {
	case "":
		if root != "" {
			return fmt.Errorf("root %q without a kind", root)
		}
		return nil
	case RouteDir, RouteFlat:
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	if root == "" {
		if kind == RouteDir {
			return errors.New("directory dataset without a root")
		}
		return nil
	}
	if len(root) > 4095 || path.IsAbs(root) || path.Clean(root) != root || root == ".." || strings.HasPrefix(root, "../") {
		return fmt.Errorf("root %q is not a clean relative path", root)
	}
	if kind == RouteDir && path.Base(root) != name {
		return fmt.Errorf("directory dataset rooted at %q, which is not named %s", root, name)
	}
	return nil
}

// ParseS3Prefix splits an object storage prefix "s3://bucket/path" into
// its bucket and its key prefix ("path/", or "" for the whole bucket). The
// bucket follows S3's naming rules (3 to 63 lowercase letters, digits, '.'
// and '-'); the path is '/'-separated components, none empty, "." or "..",
// so that every object name scrfs makes below it is unambiguous.
func ParseS3Prefix(url string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(url, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3:// URL", url)
	}
	bucket, path, _ := strings.Cut(rest, "/")
	if len(bucket) < 3 || len(bucket) > 63 || strings.Trim(bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" ||
		strings.Trim(bucket[:1]+bucket[len(bucket)-1:], "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", "", fmt.Errorf("%q: bucket %q is not a valid bucket name (3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit)", url, bucket)
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return bucket, "", nil
	}
	for c := range strings.SplitSeq(path, "/") {
		if c == "" || c == "." || c == ".." {
			return "", "", fmt.Errorf("%q: the path after the bucket has an empty, \".\" or \"..\" component", url)
		}
	}
	return bucket, path + "/", nil
}
