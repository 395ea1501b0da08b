// Package redundancy keeps every completed dataset protected across its
// redundancy set: it spreads completion through the job, gathers the set's
// readiness and gives one verdict (encode, or degraded with a reason),
// encodes with package schemes over streams of the job's network, and after
// a restart has the set take stock of what survives, plans what each dataset
// needs (rebuild the lost members, fail what is lost beyond tolerance,
// degrade while a member is away, encode what never was) and carries it out.
//
// Contract. Every dataset this node completes ends settled — protected,
// degraded with a reason, failed with a reason, or recorded under SINGLE —
// and the store hears of it once it is (Store.Settled: the store reports
// the dataset settled to whoever waits for it). Nothing is deleted except on
// a plan the set's coordinator made from every answering member's verified
// inventory. Every goroutine the package starts is owned by its Protector
// and gone when Close returns.
//
// It talks to the rest of the daemon only through what New is given: the
// cache store as a narrow interface (what it does to a dataset, the store
// reports as events), the job's jobnet.Mux and the job's record.Roster. It
// never imports fs, flush or the daemon.
package redundancy
