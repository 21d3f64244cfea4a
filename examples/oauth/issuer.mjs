// A local OAuth 2.1 / OpenID issuer for trying aegis's tenant paths
// (docs/oauth.md, "Try it locally"). It runs panva's oidc-provider with one
// client-credentials client and issues RS256 JWT access tokens whose aud
// is the resource the client names (RFC 8707), for resources under
// GATEWAY only. Not for production: its signing key is made at start.
//
//   npm install --prefix examples/oauth   (oidc-provider, pinned in package.json)
//   node examples/oauth/issuer.mjs
//
// ISSUER_PORT (default 9400), GATEWAY (default http://127.0.0.1:8080/),
// CLIENT_ID (default agent) and CLIENT_SECRET (default agent-secret).
import Provider, { errors } from 'oidc-provider';

const port = Number(process.env.ISSUER_PORT || 9400);
const gateway = process.env.GATEWAY || 'http://127.0.0.1:8080/';
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID || 'agent',
    client_secret: process.env.CLIENT_SECRET || 'agent-secret',
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
  }],
  scopes: ['mcp'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined, // the client must name the resource
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, resource) {
        if (!resource.startsWith(gateway)) {
          throw new errors.InvalidTarget(`this issuer makes tokens for ${gateway}... only`);
        }
        return { scope: 'mcp', audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});
provider.listen(port, '127.0.0.1', () => {
  console.log(`issuer ${issuer} (client_credentials for resources under ${gateway})`);
});
