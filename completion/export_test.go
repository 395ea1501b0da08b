package completion

import "context"

// SetHook sets testHook for the external tests.
func SetHook(f func(ctx context.Context, point string)) { testHook = f }
