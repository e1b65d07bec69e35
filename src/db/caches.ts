/**
 * Immutable stored documents by content digest, parsed once per isolate (src/db/documents.ts):
 * a cache hit is always the document stored under that digest.
 */
import { ToolContract, ToolGrant } from '../core/model.js';
import { TenantPolicy } from '../core/policy.js';
import { DocumentCache } from './documents.js';

export const contractCache = new DocumentCache<ToolContract>('contract', ToolContract);
export const policyCache = new DocumentCache<TenantPolicy>('policy', TenantPolicy);
export const grantCache = new DocumentCache<ToolGrant>('grant', ToolGrant);
