/**
 * Builders for the observation tests, over the lab's baseline (src/lab/observations.ts): the
 * rollback of tenant `acme`, service `api`, `production`, authorized and execution-verified with
 * the real core, its output observed as `application/json`.
 *
 * Guarantees: every builder returns a fresh object a test may mutate; `rebind` re-runs the real
 * `verifyExecution` so executor, raw observation and receipts stay consistent after an edit.
 * Never: reads a clock or randomness.
 */
import { sha256HexOfText } from '../../../../src/core/canonical/canonical.js';
import { verifyExecution } from '../../../../src/core/execution/execution.js';
import { utf8ByteLength } from '../../../../src/core/canonical/json.js';
import type { ToolExecutionObservation } from '../../../../src/core/model.js';
import { OBSERVATION_LAB_TIMES, buildObservationLabInput } from '../../../../src/lab/observations.js';
import type { ArtifactReference, RawToolObservation } from '../../../../src/core/observation/schema.js';
import {
  type ErrorObservationValidationInput,
  type ObservationOutcome,
  type ObservationValidationInput,
  validateObservation,
} from '../../../../src/core/observation/validate.js';

export { OBSERVATION_LAB_TIMES as TIMES };

/** The accepted baseline (a fresh copy). */
export function baseInput(): ObservationValidationInput {
  return structuredClone(buildObservationLabInput());
}

export interface Rebind {
  /** New inline payload: the executor reports it, the raw observation carries it. */
  readonly payload?: string;
  /** Or an artifact as the output: the executor reports its digest and size. */
  readonly artifact?: ArtifactReference;
  readonly mediaType?: string;
  readonly outcome?: ToolExecutionObservation['outcome'];
  /** New locators; an empty list also lifts the policy's locator requirement. */
  readonly locators?: RawToolObservation['locators'];
}

/**
 * Change what the executor returned (and how it ended), then recompute the execution receipt with
 * the real `verifyExecution` and point the raw observation at it: an honest chain for new content.
 */
export function rebind(input: ObservationValidationInput, r: Rebind): ObservationValidationInput {
  const o = input.observation;
  if (r.payload !== undefined) {
    o.payload = r.payload;
    o.artifact = null;
    o.payload_sha256 = sha256HexOfText(r.payload);
    o.payload_bytes = utf8ByteLength(r.payload);
  }
  if (r.artifact !== undefined) {
    o.payload = null;
    o.artifact = r.artifact;
    o.payload_sha256 = r.artifact.artifact_sha256;
    o.payload_bytes = r.artifact.byte_size;
  }
  if (r.mediaType !== undefined) o.media_type = r.mediaType;
  if (r.locators !== undefined) {
    o.locators = r.locators;
    if (r.locators.length === 0) input.policy.require_locator = false;
  }
  const eo = input.execution.observation;
  eo.output_sha256 = o.payload_sha256;
  eo.output_bytes = o.payload_bytes;
  if (r.outcome !== undefined) {
    eo.outcome = r.outcome;
    if (r.outcome !== 'succeeded') {
      eo.effect_id = null;
      eo.after_state_sha256 = null;
    }
  }
  const exec = verifyExecution(input.contract, input.authorization, eo);
  if (!exec.ok) throw new Error(`fixture execution did not evaluate: ${exec.error.message}`);
  input.execution.receipt = exec.value;
  o.execution_receipt_sha256 = exec.value.sha256;
  return input;
}

/**
 * Edit what the executor reported (leaving the raw observation alone), re-verify with the real
 * `verifyExecution`, and point the raw observation at the new receipt.
 */
export function reexecute(
  input: ObservationValidationInput,
  edit: (eo: ToolExecutionObservation) => void,
): ObservationValidationInput {
  edit(input.execution.observation);
  const exec = verifyExecution(input.contract, input.authorization, input.execution.observation);
  if (!exec.ok) throw new Error(`fixture execution did not evaluate: ${exec.error.message}`);
  input.execution.receipt = exec.value;
  input.observation.execution_receipt_sha256 = exec.value.sha256;
  return input;
}

/** Validate and return the outcome; throws (failing the test) on a `CoreError`. */
export function mustValidate(input: ObservationValidationInput): ObservationOutcome {
  const r = validateObservation(input);
  if (!r.ok) throw new Error(`expected a receipt, got ${r.error.reason}: ${JSON.stringify(r.error.issues)}`);
  return r.value;
}

/** The violation codes of a validation (empty when accepted). */
export function violationsOf(input: ObservationValidationInput): readonly string[] {
  return mustValidate(input).receipt.body.violations;
}

/** Edit the baseline, validate, return the violations. */
export function violationsAfter(edit: (i: ObservationValidationInput) => void): readonly string[] {
  const i = baseInput();
  edit(i);
  return violationsOf(i);
}

/** A verified `failed_no_effect` execution with error detail, and its error-observation input. */
export function errorInput(
  detail = '{"error":"conflict","message":"generation 7 is already active"}',
): ErrorObservationValidationInput {
  const base = rebind(baseInput(), { payload: detail, outcome: 'failed_no_effect' });
  const o = base.observation;
  return {
    ...base,
    observation: {
      observation_id: 'error-observation-acme-0042',
      tenant_id: o.tenant_id,
      policy_sha256: o.policy_sha256,
      tool_contract_sha256: o.tool_contract_sha256,
      invocation_sha256: o.invocation_sha256,
      execution_receipt_sha256: o.execution_receipt_sha256,
      source_release: o.source_release,
      error_code: 'generation_conflict',
      media_type: 'application/json',
      detail,
      detail_sha256: sha256HexOfText(detail),
      detail_bytes: utf8ByteLength(detail),
      observed_at_unix_ms: o.observed_at_unix_ms,
    },
  };
}
