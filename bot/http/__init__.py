"""The HTTP front: the ASGI app (health, web chat, webhooks), its guards and SIGTERM handling.

``server`` builds the app; ``web_auth`` decides who may use the web chat; ``body_limit`` bounds
POST bodies; ``draining`` is the uvicorn server that drains before it stops.
"""
