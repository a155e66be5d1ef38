// Publishing leadership onto the pod: what src/controller and the CLI config module import.
export type { DesiredPod, LeadershipState } from "./desired-state.ts";
export { desiredPod } from "./desired-state.ts";
export { decidePublishing, type PublishingDecision } from "./environment.ts";
export { loadKubeConfig } from "./kube-config.ts";
export { createPodPublisher } from "./pod-publisher.ts";
export {
  defaultPeerSelector,
  PUBLISH_DEFAULTS,
  type PublishConfig,
  type PublishConfigField,
  type PublishConfigInput,
  validatePublishConfig,
} from "./publish-config.ts";
export {
  DEFAULT_TIMING,
  type PatchObservation,
  type PodPublisher,
  type PodPublisherOptions,
  type PublishedObservation,
  type PublishTiming,
  type StartResult,
} from "./publisher-contract.ts";
