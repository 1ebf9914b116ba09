// Starts Swagger UI on /docs (a file rather than the usual inline script: the CSP allows no inline code).
const root = document.getElementById("swagger-ui");
window.SwaggerUIBundle({ url: root.dataset.openapiUrl, domNode: root, deepLinking: true });
