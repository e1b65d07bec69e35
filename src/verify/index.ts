/**
 * The offline verification entry point: what an executor or an auditor imports to check Writ
 * receipts without Writ. Depends only on src/core and @noble/*: runs in Node, browsers and Workers.
 */
export {
  EXECUTOR_REFUSALS,
  type ExecutorAudience,
  type ExecutorRefusal,
  type ExecutorVerdict,
  type ExecutorVerifyOptions,
  verifyAuthorizationReceipt,
} from './authorization.js';
export {
  BUNDLE_MAX_BYTES,
  BUNDLE_VERSION,
  type BundleFailureReason,
  BundleInputs,
  type BundleVerdict,
  LOG_NOT_CHECKED,
  type LogContext,
  type LogFailure,
  type LogInclusion,
  LogSection,
  type LogStatus,
  type LogVerifier,
  logLeafOf,
  ReceiptBundle,
  type VerifyBundleOptions,
  verifyBundle,
  verifyBundleBytes,
} from './bundle.js';
export {
  parsePublicKeySet,
  parsePublicKeySetText,
  PublicKeySet,
  type TrustedKeys,
  type VerificationKey,
} from '../core/receipts/keys.js';
export { SignatureEnvelope, type SignatureFailureReason } from '../core/receipts/signing.js';
export {
  logOrigin,
  logVerifierKeys,
  logVerifiers,
  receiptLogVerifier,
  verifyLogConsistency,
  witnessedLogVerifier,
} from './log.js';
export {
  COSIGNATURE_V1_TYPE,
  type Cosigned,
  type CosignatureError,
  type CosignatureErrorReason,
  type CosignatureVerdict,
  cosignatureKeyId,
  cosignatureMessage,
  MAX_WITNESSES,
  parseWitnessKey,
  verifyCosignatures,
  type WitnessKey,
  type WitnessKeyError,
  type WitnessKeyErrorReason,
  type WitnessPolicy,
  type WitnessPolicyError,
  type WitnessPolicyErrorReason,
  witnessPolicy,
  witnessVerifierKey,
} from '../core/log/cosignature.js';
