// Artifact references: digest, size, media type and storage tenant; never bytes inline; never
// another tenant's.
import { describe, expect, it } from 'vitest';
import { utf8Encode } from '../../../../src/core/canonical/json.js';
import { artifactReferenceFor } from '../../../../src/core/observation/artifact.js';
import {
  ArtifactReference,
  RawToolObservation,
  type Locator,
} from '../../../../src/core/observation/schema.js';
import type { ObservationValidationInput } from '../../../../src/core/observation/validate.js';
import { baseInput, mustValidate, rebind, violationsOf } from './fixtures.js';

const SCREENSHOT = utf8Encode('\u0089PNG fake screenshot bytes of the rollout dashboard');
const region: Locator = {
  kind: 'image_region',
  locator_id: 'health-panel',
  region: { x: 100, y: 40, width: 300, height: 200 },
  orientation_degrees: 0,
  map_id: 'dashboard/api/production',
};

function artifactInput(edit: (i: ObservationValidationInput) => void = () => {}): ObservationValidationInput {
  const artifact = artifactReferenceFor(SCREENSHOT, 'image/png', 'acme', 'png-decoder 3.1', {
    kind: 'image',
    width_px: 1280,
    height_px: 720,
  });
  const i = rebind(baseInput(), { artifact, mediaType: 'image/png', locators: [region] });
  i.policy.allowed_media_types = ['application/json', 'image/png'];
  i.trusted.artifact_record = {
    tenant_id: 'acme',
    artifact_sha256: artifact.artifact_sha256,
    byte_size: artifact.byte_size,
    media_type: 'image/png',
  };
  edit(i);
  return i;
}

describe('artifact references', () => {
  it('accepts a tenant-scoped, store-verified reference with a region locator', () => {
    const { receipt, candidate } = mustValidate(artifactInput());
    expect(receipt.body.violations).toEqual([]);
    expect(receipt.body.content_kind).toBe('artifact');
    expect(candidate?.content.kind).toBe('artifact');
    expect(candidate?.authority).toBe('untrusted_evidence_only');
    // Bytes never reach the core: nothing to scan, nothing inline.
    expect(receipt.body.signals).toEqual([]);
  });

  it('computes digest and size from the bytes', () => {
    const a = artifactReferenceFor(SCREENSHOT, 'image/png', 'acme', null, null);
    expect(a.byte_size).toBe(SCREENSHOT.length);
    expect(a.artifact_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('rejects a reference stored under another tenant, even with identical bytes', () => {
    expect(
      violationsOf(
        artifactInput((i) => i.observation.artifact && (i.observation.artifact.storage_tenant_id = 'globex')),
      ),
    ).toEqual(['artifact_cross_tenant']);
    expect(
      violationsOf(
        artifactInput((i) => i.trusted.artifact_record && (i.trusted.artifact_record.tenant_id = 'globex')),
      ),
    ).toEqual(['artifact_cross_tenant']);
  });

  it('rejects a reference the tenant store does not hold', () => {
    expect(violationsOf(artifactInput((i) => (i.trusted.artifact_record = null)))).toEqual([
      'artifact_not_found',
    ]);
  });

  it('rejects a reference that disagrees with the store', () => {
    expect(
      violationsOf(
        artifactInput((i) => i.trusted.artifact_record && (i.trusted.artifact_record.byte_size += 1)),
      ),
    ).toEqual(['artifact_record_mismatch']);
  });

  it('rejects a media type that differs from the observation', () => {
    const v = violationsOf(
      artifactInput((i) => {
        if (i.observation.artifact) i.observation.artifact.media_type = 'image/jpeg';
        if (i.trusted.artifact_record) i.trusted.artifact_record.media_type = 'image/jpeg';
      }),
    );
    expect(v).toEqual(['artifact_media_type_mismatch']);
  });

  it('bounds the referenced size at the policy maximum', () => {
    const at = (max: number) => violationsOf(artifactInput((i) => (i.policy.max_artifact_bytes = max)));
    expect(at(SCREENSHOT.length)).toEqual([]);
    expect(at(SCREENSHOT.length - 1)).toEqual(['payload_too_large']);
  });

  it('joins the artifact digest and size with the executor output', () => {
    expect(violationsOf(artifactInput((i) => (i.observation.payload_sha256 = 'a'.repeat(64))))).toEqual([
      'payload_digest_mismatch',
    ]);
    expect(violationsOf(artifactInput((i) => (i.observation.payload_bytes += 1)))).toEqual([
      'payload_bytes_mismatch',
    ]);
  });

  it('has no field that can carry bytes, and cannot be combined with an inline payload', () => {
    const a = artifactInput().observation.artifact;
    expect(ArtifactReference.safeParse({ ...a, bytes: 'iVBORw0KGgo=' }).success).toBe(false);
    expect(ArtifactReference.safeParse({ ...a, data: 'iVBORw0KGgo=' }).success).toBe(false);
    const both = { ...artifactInput().observation, payload: 'x' };
    expect(RawToolObservation.safeParse(both).success).toBe(false);
  });

  it('checks region locators against the decoded dimensions', () => {
    const v = violationsOf(
      artifactInput((i) => {
        i.observation.locators = [{ ...region, region: { x: 1000, y: 0, width: 281, height: 10 } }];
      }),
    );
    expect(v).toEqual(['locator_out_of_range']);
  });
});
