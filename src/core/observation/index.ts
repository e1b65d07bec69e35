/**
 * Observation validation: tool output admitted only as untrusted evidence (spec ch. 12).
 *
 * Guarantees: this is the module's whole public surface; everything here is pure.
 * Never: exports a way to give evidence any authority other than `untrusted_evidence_only`.
 */
export * from './schema.js';
export {
  detectSignals,
  type DetectOptions,
  credentialSpans,
  longestEncodedRun,
  SIGNAL_LIMITS,
  type SignalReport,
} from './signals.js';
export { checkLocators, type LocatorTarget } from './locators.js';
export { checkFreshness, type FreshnessFacts } from './freshness.js';
export { checkArtifact, artifactReferenceFor } from './artifact.js';
export {
  validateObservation,
  validateErrorObservation,
  checkPolicy,
  ExecutionEvidence,
  ObservationValidationInput,
  ErrorObservationValidationInput,
  type ObservationOutcome,
  type ErrorObservationOutcome,
  WithheldContent,
  WithheldObservation,
  WithheldErrorObservation,
  inlineContentFindings,
  errorDetailFindings,
  type ReceiptVersionOption,
} from './validate.js';
export {
  verifyObservationReceipt,
  verifyErrorObservationReceipt,
  verifyWithheldObservationReceipt,
  verifyWithheldErrorObservationReceipt,
  storedReceiptVersion,
} from './replay.js';
export { scanUnder, scanContentUnder, type SignalScan } from './signals/releases.js';
export { jsonStringLevelsAsRead, jsonStringsAsRead, levelText, mergeScans } from './signals/as-read.js';
export * from './derived.js';
export {
  toEvidencePart,
  type EvidencePart,
  type EvidencePartContent,
  type EvidenceProvenance,
} from './context.js';
export { observationMetrics, type ObservationMetric } from './metrics.js';
export { observationPolicyFromTenantPolicy, OBSERVATION_POLICY_DEFAULTS } from './policy.js';
