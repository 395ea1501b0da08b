package jobnet

import (
	"errors"
	"fmt"
)

// Code names a sentinel error so it survives the trip between nodes: a
// handler error that errors.Is Err travels with Name, and the caller's
// RemoteError unwraps to its own Err of that Name.
type Code struct {
	Name string
	Err  error
}

// RemoteError is the error a handler returned, as the caller sees it. It
// unwraps to the sentinel its code names (when both ends know the code),
// or, for a call this node answered itself, to the handler's own error.
type RemoteError struct {
	Node int    // node that ran the handler
	Kind string // request kind, as on the wire ("completion.begin")
	Msg  string // the handler's error text
	Code string // the sentinel's code name, "" if none matched
	err  error
}

func (e *RemoteError) Error() string { return fmt.Sprintf("node %d: %s", e.Node, e.Msg) }

// Unwrap returns the sentinel of the error's code, or the local error.
func (e *RemoteError) Unwrap() error { return e.err }

// IsRemote reports whether err is an answer from a handler (the node was
// reached and said no) rather than a failure to reach it.
func IsRemote(err error) bool {
	var re *RemoteError
	return errors.As(err, &re)
}

func codeOf(codes []Code, err error) string {
	for _, c := range codes {
		if errors.Is(err, c.Err) {
			return c.Name
		}
	}
	return ""
}

func errOfCode(codes []Code, name string) error {
	for _, c := range codes {
		if c.Name == name {
			return c.Err
		}
	}
	return nil
}
