/**
 * The observation policy derived from the tenant policy document (`src/core/policy.ts`), so the
 * edge service has one reviewed source for media types, size, age and clock skew.
 *
 * Guarantees: every bound the tenant policy states is carried over unchanged; the bounds it does
 * not state take the fixed, documented values below (a change to them is a new policy digest,
 * since the observation policy's digest is bound into every observation receipt).
 * Never: widens a tenant bound, reads a clock, or does I/O.
 */
import type { TenantPolicy } from '../policy.js';
import { OBSERVATION_POLICY_VERSION, type ObservationPolicy } from './schema.js';

/** Bounds the tenant policy document does not (yet) carry. */
export const OBSERVATION_POLICY_DEFAULTS = {
  max_artifact_bytes: 64 * 1024 * 1024,
  max_locators: 32,
  max_locator_bytes: 1024,
  require_locator: false,
  require_source_generation: false,
  max_inline_encoded_chars: 4096,
} as const;

export function observationPolicyFromTenantPolicy(policy: TenantPolicy): ObservationPolicy {
  return {
    policy_version: OBSERVATION_POLICY_VERSION,
    allowed_media_types: [...policy.allowed_media_types],
    max_payload_bytes: policy.observation_limits.max_observation_bytes,
    max_age_ms: policy.observation_max_age_ms,
    max_clock_skew_ms: policy.observation_limits.max_clock_skew_ms,
    ...OBSERVATION_POLICY_DEFAULTS,
  };
}
