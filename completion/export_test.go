package completion

import "context"

// SetAgreedHook sets testHookAgreed for the external tests.
func SetAgreedHook(f func(ctx context.Context)) { testHookAgreed = f }
