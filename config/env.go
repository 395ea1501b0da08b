package config

import "strings"

// envPrefix starts every variable this package reads, except SLURM_JOB_ID.
const envPrefix = "SCRFS_"

// applyEnv applies the SCRFS_<SECTION>_<KEY> entries of env ("NAME=VALUE")
// onto c, recording their origin in origins if it is non-nil. If a name
// appears more than once the last entry wins, as in a shell.
//
// A variable whose name starts with SCRFS_<KNOWN SECTION>_ but names no key
// is an error; any other SCRFS_ variable (SCRFS_CONTROL, say) belongs to
// someone else and is ignored. Variables are applied in the order they first
// appear, so errors come out in a stable order.
func applyEnv(c *Config, env []string, origins map[string]origin) []*Error {
	s := newSchema()
	byEnv := make(map[string]*field, len(s.fields))
	for i := range s.fields {
		byEnv[s.fields[i].env()] = &s.fields[i]
	}
	vals := make(map[string]string)
	var names []string
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		if _, seen := vals[name]; !seen {
			names = append(names, name)
		}
		vals[name] = val
	}
	var errs []*Error
	for _, name := range names {
		val := vals[name]
		f := byEnv[name]
		if f == nil {
			section, rest, ok := strings.Cut(strings.TrimPrefix(name, envPrefix), "_")
			if !ok || section != strings.ToUpper(section) || !s.isSection(strings.ToLower(section)) {
				continue // not one of ours
			}
			key := strings.ToLower(section + "." + rest)
			hint := ""
			if k := s.suggestKey(strings.ToLower(section), strings.ToLower(rest)); k != "" {
				hint = s.byKey[k].env()
			}
			errs = append(errs, &Error{
				Env: name, Key: key, Kind: ErrUnknownKey,
				Msg: `unknown key "` + key + `"` + didYouMean(hint),
			})
			continue
		}
		if f.redact {
			val = redacted // from here on val is only used in messages
		}
		if err := f.setEnv(c, vals[name]); err != nil {
			errs = append(errs, &Error{
				Env: name, EnvValue: val, Key: f.key(), Kind: ErrInvalid, Msg: err.Error(),
			})
			continue
		}
		if origins != nil {
			origins[f.key()] = origin{env: name, envValue: val}
		}
	}
	return errs
}

// lookupEnv returns the value of the last entry named name in env.
func lookupEnv(env []string, name string) (string, bool) {
	val, found := "", false
	for _, kv := range env {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			val, found = v, true
		}
	}
	return val, found
}
