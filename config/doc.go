// Package config loads, layers and validates the settings of scrfs.
//
// Settings come, as in SCR, from four layers; a key set in a higher layer
// replaces the value of a lower one, and lists replace rather than append:
//
//  1. environment variables SCRFS_<SECTION>_<KEY> (Sources.Env),
//  2. the user's file (--config FILE, Sources.UserFile),
//  3. the system file (/etc/scrfs.toml, Sources.SystemFile),
//  4. the built-in defaults, decoded from the embedded default.toml.
//
// Files are TOML. Decoding is strict: an unknown key, a value of the wrong
// type and a value that breaks a rule are all errors, reported together, each
// naming the key, where it came from (file and line, or environment
// variable), what is allowed, and for a misspelt key the nearest known one.
// Every problem is an *Error. Those about keys and values wrap ErrUnknownKey
// or ErrInvalid; one about a file that cannot be read wraps the error of the
// read (fs.ErrNotExist for a missing user file).
//
// The package has no global state: Load takes everything it reads through
// Sources, and a *Config is a plain value owned by its caller.
package config
