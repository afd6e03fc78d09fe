package stripe

import "fmt"

// The receiver's Stripe API version policy (docs/events.md's "Stripe API
// versions" says it to operators):
//
//   - Built against one version, APIVersion (2023-10-16, stripe-go v76's,
//     the Spec's APIVersion): every v1 request the receiver makes is
//     pinned to it (the Events listing of reconciliation, the objects a
//     thin event names), and its /v2 reads to V2APIVersion.
//   - Snapshot events of every version are read: a handler reads the
//     fields it needs by name, in each place Stripe has put one (a
//     subscription's current_period_end, on the subscription up to
//     2025-02-24.acacia, on its items from 2025-03-31.basil; an old
//     event's request as a string), and an event whose fields cannot be
//     read is parked for an operator, kept, never guessed. None is refused
//     for its version: a refusal makes Stripe retry for three days and then
//     drop the event, and the Stripe CLI forwards events in the account's
//     default version, whatever it is. An event of another version than
//     APIVersion is counted by version (webhook_api_version_mismatches_total),
//     which is how a drift shows before anything breaks.
//   - Thin events are unversioned; what is fetched for them is read in the
//     pinned versions.
//   - Endpoints are pinned: `server endpoints check` reports every webhook
//     endpoint whose api_version is not APIVersion (VersionFinding),
//     including one that follows the account's default (null), whose
//     events change shape the day someone upgrades the default in
//     Workbench. It never "fixes" one: Stripe sets an endpoint's version
//     when it is created, and a new version is a new endpoint, made as the
//     docs/events.md's "When Stripe retires a version" says.

// VersionFinding is what `server endpoints check` reports of a Stripe
// webhook endpoint's api_version (nil: the endpoint follows the account's
// default), or "" when it is the version the receiver is built against.
func VersionFinding(apiVersion *string) string {
	switch {
	case apiVersion == nil || *apiVersion == "":
		return fmt.Sprintf("api_version follows the account's default: its events change shape whenever the default "+
			"is upgraded in Workbench; create the endpoint pinned to %s, the version the receiver is built against "+
			"(docs/events.md: Stripe API versions)", APIVersion)
	case *apiVersion != APIVersion:
		return fmt.Sprintf("api_version is %s, the receiver is built against %s: its events are read and counted "+
			"(webhook_api_version_mismatches_total), and a field Stripe moved in between parks them; pin a new endpoint "+
			"to %s, or upgrade the receiver first (docs/events.md: When Stripe retires a version)",
			quote(*apiVersion), APIVersion, APIVersion)
	}
	return ""
}
