package fs

import gofs "github.com/hanwen/go-fuse/v2/fs"

// The operations each node kind and the file handle implement. A missing
// method would silently fall back to go-fuse's default (often ENOTSUP), so
// the compiler checks the list.
var (
	_ = (gofs.NodeLookuper)((*nsNode)(nil))
	_ = (gofs.NodeReaddirer)((*nsNode)(nil))
	_ = (gofs.NodeGetattrer)((*nsNode)(nil))
	_ = (gofs.NodeSetattrer)((*nsNode)(nil))
	_ = (gofs.NodeMkdirer)((*nsNode)(nil))
	_ = (gofs.NodeRmdirer)((*nsNode)(nil))
	_ = (gofs.NodeCreater)((*nsNode)(nil))
	_ = (gofs.NodeMknoder)((*nsNode)(nil))
	_ = (gofs.NodeSymlinker)((*nsNode)(nil))
	_ = (gofs.NodeLinker)((*nsNode)(nil))
	_ = (gofs.NodeUnlinker)((*nsNode)(nil))
	_ = (gofs.NodeRenamer)((*nsNode)(nil))
	_ = (gofs.NodeStatfser)((*nsNode)(nil))
	_ = (gofs.NodeFsyncer)((*nsNode)(nil))
	_ = (gofs.NodeOnAdder)((*nsNode)(nil))

	_ = (gofs.NodeLookuper)((*dsNode)(nil))
	_ = (gofs.NodeReaddirer)((*dsNode)(nil))
	_ = (gofs.NodeGetattrer)((*dsNode)(nil))
	_ = (gofs.NodeSetattrer)((*dsNode)(nil))
	_ = (gofs.NodeMkdirer)((*dsNode)(nil))
	_ = (gofs.NodeRmdirer)((*dsNode)(nil))
	_ = (gofs.NodeCreater)((*dsNode)(nil))
	_ = (gofs.NodeMknoder)((*dsNode)(nil))
	_ = (gofs.NodeSymlinker)((*dsNode)(nil))
	_ = (gofs.NodeLinker)((*dsNode)(nil))
	_ = (gofs.NodeUnlinker)((*dsNode)(nil))
	_ = (gofs.NodeRenamer)((*dsNode)(nil))
	_ = (gofs.NodeOpener)((*dsNode)(nil))
	_ = (gofs.NodeReadlinker)((*dsNode)(nil))
	_ = (gofs.NodeStatfser)((*dsNode)(nil))
	_ = (gofs.NodeFsyncer)((*dsNode)(nil))

	_ = (gofs.FileReader)((*handle)(nil))
	_ = (gofs.FileWriter)((*handle)(nil))
	_ = (gofs.FileFlusher)((*handle)(nil))
	_ = (gofs.FileReleaser)((*handle)(nil))
	_ = (gofs.FileFsyncer)((*handle)(nil))
	_ = (gofs.FileAllocater)((*handle)(nil))
	_ = (gofs.FileLseeker)((*handle)(nil))
	_ = (gofs.FilePassthroughFder)((*handle)(nil))

	_ = (gofs.FileReader)((*remoteHandle)(nil))
	_ = (gofs.FileFlusher)((*remoteHandle)(nil))
	_ = (gofs.FileReleaser)((*remoteHandle)(nil))
	_ = (gofs.FilePassthroughFder)((*remoteHandle)(nil))
)
