// A local token service for docs/connections.md's token exchange walkthrough
// and shared/gateway's TestExchangeEndToEnd. It runs panva's oidc-provider as
// a tenant's own issuer:
//
// - agents get RS256 JWT access tokens for the gateway's tenant paths by
//   client credentials (RFC 8707 resource: a URL under GATEWAY);
// - aegis (client "aegis", secret AEGIS_SECRET) exchanges such a token
//   (RFC 8693, grant_type urn:ietf:params:oauth:grant-type:token-exchange)
//   for a token whose aud is one of UPSTREAMS, its sub the subject token's,
//   its act the client that asked. The subject token must be one this
//   service signed, unexpired, for the gateway.
//
// Not for production: its signing key is made at start. Every exchange is
// logged as "exchange SUB RESOURCE" (never a token).
//
//   npm install --prefix examples/tokenexchange   (oidc-provider, pinned)
//   node examples/tokenexchange/token-service.mjs
//
// ISSUER_PORT (default 9500), GATEWAY (default http://127.0.0.1:8080/t/),
// UPSTREAMS (comma-separated resource URLs; default
// http://127.0.0.1:9600/mcp), AGENTS (comma-separated client ids, each
// with the secret ID-secret; default agent-alice,agent-bob), AEGIS_SECRET
// (default aegis-secret).
import crypto from 'node:crypto';
import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

const port = Number(process.env.ISSUER_PORT || 9500);
const issuer = `http://127.0.0.1:${port}`;
const gateway = process.env.GATEWAY || 'http://127.0.0.1:8080/t/';
const upstreams = (process.env.UPSTREAMS || 'http://127.0.0.1:9600/mcp').split(',');
const agents = (process.env.AGENTS || 'agent-alice,agent-bob').split(',');
const grant = 'urn:ietf:params:oauth:grant-type:token-exchange';
const accessToken = 'urn:ietf:params:oauth:token-type:access_token';
const jwtType = 'urn:ietf:params:oauth:token-type:jwt';
const ttl = 600;

const kid = 'k-' + crypto.randomUUID();
const { privateKey, publicKey } = await jose.generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
const verifyKeys = jose.createLocalJWKSet({ keys: [{ ...(await jose.exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' }] });

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    ...agents.map((id) => ({
      client_id: id, client_secret: id + '-secret',
      grant_types: ['client_credentials'], redirect_uris: [], response_types: [],
    })),
    {
      client_id: 'aegis', client_secret: process.env.AEGIS_SECRET || 'aegis-secret',
      grant_types: [grant], redirect_uris: [], response_types: [],
    },
  ],
  scopes: ['mcp'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined, // the agent must name the resource
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, resource) {
        if (!resource.startsWith(gateway)) {
          throw new errors.InvalidTarget(`agents get tokens for ${gateway}... only`);
        }
        return { scope: 'mcp', audience: resource, accessTokenFormat: 'jwt', accessTokenTTL: ttl, jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});

// RFC 8693: the subject token for a token of one of the upstreams.
provider.registerGrantType(grant, async (ctx) => {
  const p = ctx.oidc.params;
  if (p.subject_token_type !== accessToken && p.subject_token_type !== jwtType) {
    throw new errors.InvalidRequest('subject_token_type must be an access token or a JWT');
  }
  if (p.requested_token_type && p.requested_token_type !== accessToken) {
    throw new errors.InvalidRequest('only access tokens are issued');
  }
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(p.subject_token || '', verifyKeys, { issuer, algorithms: ['RS256'], requiredClaims: ['exp', 'sub'] }));
  } catch {
    throw new errors.InvalidGrant('the subject token is not a valid token of this issuer');
  }
  if (typeof claims.aud !== 'string' || !claims.aud.startsWith(gateway)) {
    throw new errors.InvalidGrant('the subject token is not for the gateway');
  }
  if (!upstreams.includes(p.resource)) {
    throw new errors.InvalidTarget('tokens are exchanged for the configured upstreams only');
  }
  const now = Math.floor(Date.now() / 1000);
  const exp = Math.min(claims.exp, now + ttl);
  const client = ctx.oidc.client.clientId;
  const token = await new jose.SignJWT({ scope: 'mcp', client_id: client, act: { sub: client } })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
    .setIssuer(issuer).setSubject(claims.sub).setAudience(p.resource)
    .setIssuedAt(now).setNotBefore(now).setExpirationTime(exp).setJti(crypto.randomUUID())
    .sign(privateKey);
  console.log(`exchange ${claims.sub} ${p.resource}`);
  ctx.body = { access_token: token, issued_token_type: accessToken, token_type: 'Bearer', expires_in: exp - now, scope: 'mcp' };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope']);

provider.listen(port, '127.0.0.1', () => {
  console.log(`issuer ${issuer} (token exchange for ${upstreams.join(', ')})`);
});
