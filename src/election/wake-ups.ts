// What makes an elector look at once instead of at its next scheduled tick: a release notice for
// its key, the notice feed reconnecting or no longer known healthy, its campaign gate changing.
import type { ElectorOptions } from "./elector-types.ts";

/**
 * A notice makes a follower claim at once (nextAction says why that is safe even when it is
 * forged), and a leader renew at once: an operator's release of its lease then ends it at once.
 * A reconnection (notices may have been missed) or a feed no longer known healthy makes a
 * follower read at once; from then on it polls until the feed is healthy again. The gate closing
 * makes a leader hand over at once; opening makes a follower look, and claim. Answers the
 * unsubscribers.
 */
export function subscribeWakeUps(
  key: string,
  options: Pick<ElectorOptions, "releases" | "campaign">,
  look: () => void,
  noticed: () => void,
): Array<() => void> {
  const feed = options.releases;
  const unsubscribe: Array<() => void> = [];
  if (feed) unsubscribe.push(feed.subscribe((k) => k === key && noticed()));
  if (feed?.subscribeReconnects) unsubscribe.push(feed.subscribeReconnects(look));
  if (feed?.subscribeUnhealthy) unsubscribe.push(feed.subscribeUnhealthy(look));
  if (options.campaign) unsubscribe.push(options.campaign.subscribe(look));
  return unsubscribe;
}
