"""The local interactive walkthrough: a FastAPI app (`app.create_app`) and its front end (`static/`)."""
